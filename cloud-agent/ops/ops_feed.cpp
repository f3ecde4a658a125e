// AlertBook, OrderEventBatch and ViewSchedule (ops_feed.hpp).
#include "ops/ops_feed.hpp"

#include <algorithm>

namespace vend::agent {

AlertBook::Raised AlertBook::raise(const std::string& device, int slot, const std::string& code,
                                   const std::string& severity, const std::string& message,
                                   int64_t now_ms) {
  Key key{device, slot, code};
  auto it = active_.find(key);
  if (it != active_.end() && it->second.message == message) return {};  // already said
  ops::Alert alert{code, severity, "raised", device, slot, message, now_ms};
  bool fresh = it == active_.end();
  active_[key] = alert;
  return {alert, fresh};
}

std::optional<ops::Alert> AlertBook::clear(const std::string& device, int slot,
                                           std::string_view code, int64_t now_ms) {
  if (active_.empty()) return std::nullopt;  // the usual case, without building a key
  auto it = active_.find(Key{device, slot, std::string(code)});
  if (it == active_.end()) return std::nullopt;
  ops::Alert alert = std::move(it->second);
  active_.erase(it);
  alert.state = "cleared";
  alert.ts_ms = now_ms;
  return alert;
}

bool AlertBook::active(const std::string& device, int slot, std::string_view code) const {
  if (active_.empty()) return false;
  return active_.count(Key{device, slot, std::string(code)}) != 0;
}

std::vector<ops::Alert> AlertBook::list() const {
  std::vector<ops::Alert> out;
  out.reserve(active_.size());
  for (const auto& [key, alert] : active_) out.push_back(alert);
  return out;
}

std::vector<std::pair<std::string, int64_t>> AlertBook::counts_by_code() const {
  std::map<std::string, int64_t> counts;
  for (const auto& [key, alert] : active_) ++counts[alert.code];
  return {counts.begin(), counts.end()};
}

bool OrderEventBatch::add(const ops::OrderEventView& event) {
  pending_.add(event);
  return pending_.size() >= kMaxPerMessage;
}

std::optional<std::string> OrderEventBatch::take() {
  if (pending_.size() == 0) return std::nullopt;
  return pending_.finish();
}

void ViewSchedule::device_changed(const std::string& device, int64_t now_ms) {
  fleet_dirty_ = true;
  // One hash look-up per change (every reservation makes one); the name is
  // copied only when the device becomes dirty.
  Device& d = devices_.try_emplace(device).first->second;
  if (!d.dirty) {
    d.dirty = true;
    dirty_.push_back(device);
  }
  // A device not published for an interval is due now: scan next time.
  if (d.published_ms == 0 || now_ms - d.published_ms >= interval_ms_) scan_due_ms_ = 0;
}

std::vector<std::string> ViewSchedule::take_due_devices(int64_t now_ms) {
  std::vector<std::string> due;
  if (now_ms < scan_due_ms_) return due;
  int64_t next_due = 0;
  size_t kept = 0;
  for (size_t i = 0; i < dirty_.size(); ++i) {
    std::string& id = dirty_[i];
    Device& d = devices_[id];
    if (d.published_ms != 0 && now_ms - d.published_ms < interval_ms_) {
      int64_t at = d.published_ms + interval_ms_;
      next_due = next_due == 0 ? at : std::min(next_due, at);
      if (kept != i) dirty_[kept] = std::move(id);
      ++kept;
      continue;
    }
    d.published_ms = now_ms;
    d.dirty = false;
    due.push_back(std::move(id));
  }
  dirty_.resize(kept);
  std::sort(due.begin(), due.end());  // by id, as before: a deterministic order
  scan_due_ms_ = next_due;
  return due;
}

bool ViewSchedule::take_fleet_due(int64_t now_ms) {
  if (!fleet_dirty_) return false;
  if (fleet_published_ms_ != 0 && now_ms - fleet_published_ms_ < interval_ms_) return false;
  fleet_dirty_ = false;
  fleet_published_ms_ = now_ms;
  return true;
}

}  // namespace vend::agent
