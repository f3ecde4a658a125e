// The run's trace: one line per notable thing, hashed (FNV-1a) so that two
// runs can be compared cheaply, the last lines kept for failure reports, and
// optionally every line written to a file. Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <fstream>
#include <memory>
#include <string>

namespace vend::sim {

class Trace {
 public:
  // `path` "" = no file.
  explicit Trace(const std::string& path, size_t keep_last = 20);
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  void set_step(int64_t step, int64_t now_ms) {
    step_ = step;
    now_ms_ = now_ms;
  }
  // Adds "<step> <t> <line>".
  void add(const std::string& line);

  uint64_t hash() const { return hash_; }
  int64_t lines() const { return lines_; }
  std::string last_lines() const;  // the kept lines, newline-terminated

 private:
  std::unique_ptr<std::ofstream> file_;
  size_t keep_last_;
  std::deque<std::string> last_;
  uint64_t hash_ = 1469598103934665603ULL;
  int64_t lines_ = 0;
  int64_t step_ = 0;
  int64_t now_ms_ = 0;
};

}  // namespace vend::sim
