// RateLimitedLog: a bounded-rate front for a Logger, for lines an outsider
// can trigger at will (rejected messages, refused commands). Callers count
// every event themselves; this only decides which lines reach the log.
//
// Per (source, reason) key: the first line of an interval is logged as
// given; the next ones within `interval_ms` are suppressed and counted. When
// the key's interval has ended, its suppressed count is logged once
// ("... N similar line(s) suppressed ...") — by flush() (call it from a tick)
// or just before the key's next line, whichever comes first.
//
// Bounded memory: at most `max_keys` keys are tracked; `source` and `reason`
// are cut to kMaxKeyPart bytes. A line whose key does not fit (all tracked
// keys still inside their interval) falls into one shared overflow key
// ("*", "*"), itself logged at most once per interval. So at most
// (max_keys + 1) lines plus as many summaries are written per interval,
// whatever the input.
//
// Not thread-safe (its owner serializes calls). Non-copyable.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "vend/clock.hpp"
#include "vend/log.hpp"

namespace vend {

class RateLimitedLog {
 public:
  static constexpr size_t kMaxKeyPart = 64;

  struct Options {
    int64_t interval_ms = 60'000;  // <= 0: every line is logged (no limiting)
    size_t max_keys = 256;         // >= 1
  };

  // `clock` and `log` must outlive this object.
  RateLimitedLog(const Clock& clock, Logger& log, Options options);
  RateLimitedLog(const RateLimitedLog&) = delete;
  RateLimitedLog& operator=(const RateLimitedLog&) = delete;

  // Logs `message` (at `level`, under `component`) unless the key
  // (source, reason) already logged a line within the interval. Returns
  // true if the line was written.
  bool log(LogLevel level, std::string_view component, std::string_view source,
           std::string_view reason, std::string_view message);

  // Writes the summary of every key whose interval has ended with lines
  // suppressed, and forgets keys whose interval has ended.
  void flush();

  uint64_t suppressed_total() const { return suppressed_total_; }
  size_t tracked_keys() const { return keys_.size(); }

 private:
  struct Entry {
    int64_t window_start_ms = 0;
    uint64_t suppressed = 0;
    LogLevel level = LogLevel::kWarn;
    std::string component;
  };
  using Key = std::pair<std::string, std::string>;

  void summarize(const Key& key, const Entry& entry, int64_t now_ms);
  bool expired(const Entry& entry, int64_t now_ms) const;
  // The entry `key` uses: its own, a fresh one, or the overflow one.
  std::pair<const Key, Entry>& slot_for(Key key, int64_t now_ms, bool& fresh);

  const Clock& clock_;
  Logger& log_;
  Options options_;
  std::map<Key, Entry> keys_;
  uint64_t suppressed_total_ = 0;
};

}  // namespace vend
