#include "vend/log.hpp"

#include <chrono>
#include <cstdio>
#include <ctime>

namespace vend {

const char* to_string(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kError: return "ERROR";
  }
  return "?";
}

void StderrLogger::log(LogLevel level, std::string_view component, std::string_view message) {
  if (level < min_level_) return;
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t secs = system_clock::to_time_t(now);
  int ms = static_cast<int>(duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
  std::lock_guard lock(mu_);
  std::fprintf(stderr, "%s.%03dZ %-5s %.*s: %.*s\n", stamp, ms, to_string(level),
               static_cast<int>(component.size()), component.data(),
               static_cast<int>(message.size()), message.data());
}

void MemoryLogger::log(LogLevel level, std::string_view component, std::string_view message) {
  std::lock_guard lock(mu_);
  records_.push_back({level, std::string(component), std::string(message)});
}

std::vector<MemoryLogger::Record> MemoryLogger::records() const {
  std::lock_guard lock(mu_);
  return records_;
}

bool MemoryLogger::contains(std::string_view needle, LogLevel level) const {
  std::lock_guard lock(mu_);
  for (const auto& r : records_) {
    if (r.level >= level && r.message.find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace vend
