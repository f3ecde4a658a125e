#include "vend/log_limiter.hpp"

#include <algorithm>

namespace vend {

namespace {
const std::pair<std::string, std::string> kOverflowKey{"*", "*"};

std::string cut(std::string_view part) {
  return std::string(part.substr(0, RateLimitedLog::kMaxKeyPart));
}
}  // namespace

RateLimitedLog::RateLimitedLog(const Clock& clock, Logger& log, Options options)
    : clock_(clock), log_(log), options_(options) {
  options_.max_keys = std::max<size_t>(1, options_.max_keys);
}

bool RateLimitedLog::expired(const Entry& entry, int64_t now_ms) const {
  return now_ms - entry.window_start_ms >= options_.interval_ms;
}

void RateLimitedLog::summarize(const Key& key, const Entry& entry, int64_t now_ms) {
  if (entry.suppressed == 0) return;
  std::string what = key == kOverflowKey ? std::string("(other sources and reasons)")
                                         : "(" + key.first + ", " + key.second + ")";
  log_.log(entry.level, entry.component,
           std::to_string(entry.suppressed) + " similar line(s) " + what +
               " suppressed in the last " +
               std::to_string((now_ms - entry.window_start_ms) / 1000) + " s");
}

std::pair<const RateLimitedLog::Key, RateLimitedLog::Entry>& RateLimitedLog::slot_for(
    Key key, int64_t now_ms, bool& fresh) {
  fresh = false;
  if (auto it = keys_.find(key); it != keys_.end()) return *it;
  if (keys_.size() >= options_.max_keys) flush();
  if (keys_.size() < options_.max_keys) {
    fresh = true;
    return *keys_.emplace(std::move(key), Entry{now_ms, 0, LogLevel::kWarn, ""}).first;
  }
  // Full of live keys: one shared overflow entry, beyond the cap by one.
  auto [it, inserted] = keys_.try_emplace(kOverflowKey, Entry{now_ms, 0, LogLevel::kWarn, ""});
  fresh = inserted;
  return *it;
}

bool RateLimitedLog::log(LogLevel level, std::string_view component, std::string_view source,
                         std::string_view reason, std::string_view message) {
  if (options_.interval_ms <= 0) {
    log_.log(level, component, message);
    return true;
  }
  int64_t now = clock_.monotonic_ms();
  bool fresh = false;
  auto& [key, entry] = slot_for(Key{cut(source), cut(reason)}, now, fresh);
  if (!fresh && !expired(entry, now)) {
    ++entry.suppressed;
    ++suppressed_total_;
    return false;
  }
  if (!fresh) summarize(key, entry, now);
  entry = Entry{now, 0, level, std::string(component)};
  log_.log(level, component, message);
  return true;
}

void RateLimitedLog::flush() {
  int64_t now = clock_.monotonic_ms();
  for (auto it = keys_.begin(); it != keys_.end();) {
    if (!expired(it->second, now)) {
      ++it;
      continue;
    }
    summarize(it->first, it->second, now);
    it = keys_.erase(it);
  }
}

}  // namespace vend
