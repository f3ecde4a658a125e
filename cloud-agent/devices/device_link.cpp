// DeviceKeys, AckWindow and ClockSkew (device_link.hpp).
#include "devices/device_link.hpp"

#include <algorithm>
#include <cassert>
#include <chrono>

namespace vend::agent {

namespace {

bool is_ready(const AckWindow::Ticket& ticket) {
  return ticket.valid() && ticket.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace

DeviceKeys::Signed DeviceKeys::verify(std::string_view canonical, std::string_view mac) const {
  if (crypto::verify(current_, canonical, mac)) return Signed::kCurrent;
  if (next_ && crypto::verify(*next_, canonical, mac)) return Signed::kNext;
  return Signed::kNo;
}

void DeviceKeys::promote() {
  assert(next_.has_value());
  current_ = std::move(*next_);
  next_.reset();
}

AckWindow::Place AckWindow::place(uint64_t seq) const {
  if (seq <= last_processed_) return Place::kDuplicate;
  return seq == last_processed_ + 1 ? Place::kNext : Place::kAhead;
}

void AckWindow::restore(uint64_t seq, std::string mac) {
  last_processed_ = committed_ = seq;
  last_mac_ = committed_mac_ = std::move(mac);
}

void AckWindow::processed(uint64_t seq, Ticket ticket, std::string mac) {
  last_processed_ = seq;
  last_mac_ = mac;
  pending_.push_back(Pending{seq, std::move(ticket), std::move(mac)});
}

void AckWindow::restart(Ticket ticket) {
  last_processed_ = committed_ = 0;
  last_mac_.clear();
  committed_mac_.clear();
  pending_.clear();
  pending_.push_back(Pending{0, std::move(ticket), ""});
  ack_wanted_ = false;
  diverged_ = false;
}

bool AckWindow::schedule(int64_t now_ms, int64_t interval_ms) {
  if (due_ms_ != 0) return false;
  due_ms_ = now_ms + interval_ms;
  return true;
}

bool AckWindow::expedite(uint64_t seq, int64_t now_ms) {
  expedited_ = std::max(expedited_, seq);
  bool scheduled = due_ms_ == 0;
  if (scheduled || due_ms_ > now_ms) due_ms_ = now_ms;
  return scheduled;
}

std::optional<AckWindow::Ticket> AckWindow::newest_ticket() const {
  if (pending_.empty()) return std::nullopt;
  return pending_.back().ticket;
}

AckWindow::Flushed AckWindow::flush(int64_t now_ms, int64_t interval_ms) {
  Flushed out;
  bool advanced = false;
  while (!pending_.empty() && is_ready(pending_.front().ticket)) {
    Status s = pending_.front().ticket.get();
    if (!s.ok()) {
      out.status = s;
      return out;
    }
    committed_ = pending_.front().seq;
    committed_mac_ = std::move(pending_.front().mac);
    pending_.pop_front();
    advanced = true;
  }
  if (advanced || ack_wanted_) {
    out.ack_upto = committed_;
    out.ack_mac = committed_mac_;
    ack_wanted_ = false;
  }
  if (pending_.empty()) {
    due_ms_ = 0;
  } else {
    due_ms_ = committed_ < expedited_ ? now_ms : now_ms + interval_ms;
  }
  out.still_due = due_ms_ != 0;
  return out;
}

bool ClockSkew::observe(int64_t now_ms, int64_t device_ts_ms, int64_t wall_ms, int64_t window_ms,
                        bool status) {
  if (upper_ && now_ms - upper_at_ms_ > window_ms) upper_.reset();
  close_round_trip(now_ms);
  if (status && asked_mono_ms_)
    reply_ts_ms_ = std::max(reply_ts_ms_.value_or(device_ts_ms), device_ts_ms);
  int64_t sample = device_ts_ms - wall_ms;
  if (upper_ && sample > *upper_) upper_.reset();  // the clock moved since: the bound is gone
  samples_.emplace_back(now_ms, sample);
  while (samples_.size() > kMaxSamples ||
         (samples_.size() > 1 && now_ms - samples_.front().first > window_ms)) {
    samples_.pop_front();
  }
  int64_t skew = samples_.front().second;
  for (const auto& [at, s] : samples_) skew = std::max(skew, s);
  bool changed = skew_ != skew;
  skew_ = skew;
  return changed;
}

void ClockSkew::close_round_trip(int64_t now_ms) {
  if (!asked_mono_ms_ || now_ms - *asked_mono_ms_ < kReplyWindowMs) return;
  if (reply_ts_ms_) {
    upper_ = *reply_ts_ms_ - asked_wall_ms_;
    upper_at_ms_ = *asked_mono_ms_;
  }
  asked_mono_ms_.reset();
  reply_ts_ms_.reset();
}

void ClockSkew::asked(int64_t now_ms, int64_t wall_ms) {
  close_round_trip(now_ms);
  if (asked_mono_ms_) return;  // still open: its answer is due
  asked_mono_ms_ = now_ms;
  asked_wall_ms_ = wall_ms;
  reply_ts_ms_.reset();
}

bool ClockSkew::wants_round_trip(int64_t now_ms, int64_t alert_ms) const {
  if (alert_ms <= 0 || !skew_ || *skew_ >= -alert_ms || upper_) return false;
  return !asked_mono_ms_ || now_ms - *asked_mono_ms_ >= kReplyWindowMs;
}

ClockSkew::Alert ClockSkew::judge(int64_t alert_ms) const {
  if (alert_ms <= 0 || !skew_) return Alert::kKeep;
  if (*skew_ > alert_ms || (upper_ && *upper_ < -alert_ms)) return Alert::kRaise;
  int64_t size = *skew_ < 0 ? -*skew_ : *skew_;
  if (size * 10 < alert_ms * 8) return Alert::kClear;
  return Alert::kKeep;
}

}  // namespace vend::agent
