// Logger: passed in, never global (CONVENTIONS.md #2).
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace vend {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

const char* to_string(LogLevel level);

// Thread-safe sink for one-line log records.
class Logger {
 public:
  virtual ~Logger() = default;
  virtual void log(LogLevel level, std::string_view component, std::string_view message) = 0;
  // False when a record at `level` would be dropped: a caller can skip
  // building a message nobody reads (a per-request debug line).
  virtual bool enabled(LogLevel /*level*/) const { return true; }

  void debug(std::string_view c, std::string_view m) { log(LogLevel::kDebug, c, m); }
  void info(std::string_view c, std::string_view m) { log(LogLevel::kInfo, c, m); }
  void warn(std::string_view c, std::string_view m) { log(LogLevel::kWarn, c, m); }
  void error(std::string_view c, std::string_view m) { log(LogLevel::kError, c, m); }
};

// Writes "2026-11-29T14:00:00.123Z WARN  component: message" lines to stderr.
class StderrLogger final : public Logger {
 public:
  explicit StderrLogger(LogLevel min_level = LogLevel::kInfo) : min_level_(min_level) {}
  void log(LogLevel level, std::string_view component, std::string_view message) override;
  bool enabled(LogLevel level) const override { return level >= min_level_; }

 private:
  LogLevel min_level_;
  std::mutex mu_;
};

// Keeps records in memory; tests assert on what was logged.
class MemoryLogger final : public Logger {
 public:
  struct Record {
    LogLevel level;
    std::string component;
    std::string message;
  };
  void log(LogLevel level, std::string_view component, std::string_view message) override;
  std::vector<Record> records() const;
  // True if any record at or above `level` contains `needle`.
  bool contains(std::string_view needle, LogLevel level = LogLevel::kDebug) const;

 private:
  mutable std::mutex mu_;
  std::vector<Record> records_;
};

// Discards everything (benchmarks, simulation fleets).
class NullLogger final : public Logger {
 public:
  void log(LogLevel, std::string_view, std::string_view) override {}
  bool enabled(LogLevel) const override { return false; }
};

}  // namespace vend
