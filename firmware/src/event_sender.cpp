// The outbox drain, acknowledgements, resend requests and outbox pressure.
#include "vend/fw/event_sender.hpp"

#include <algorithm>

#include "vend/assert.hpp"
#include "vend/topics.hpp"

namespace vend::fw {

namespace {

constexpr const char* kLog = "core";
constexpr int64_t kOutboxScanMs = 250;  // notice rows written by other processes
constexpr int64_t kPressureCheckMs = 1000;

// FNV-1a: a stable per-device jitter, so a fleet reconnecting at once spreads
// its drains out, and the same device always waits the same.
uint64_t stable_hash(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// An ack or resend naming another ledger (the one an old SD card or board
// held) says nothing about this ledger's seqs. "" is an agent that names none.
bool for_other_ledger(const std::string& named, const Identity& self) {
  return !named.empty() && named != self.ledger_id;
}

}  // namespace

EventSender::EventSender(Ledger& ledger, Transport& transport, const Clock& clock, Random& random,
                         Logger& log, const CoreOptions& options, Refusals& refusals,
                         CoreStats& stats)
    : ledger_(ledger),
      transport_(transport),
      clock_(clock),
      random_(random),
      log_(log),
      options_(options),
      refusals_(refusals),
      stats_(stats) {}

Status EventSender::boot() {
  auto acked = ledger_.acked_seq();
  if (!acked.ok()) return acked.error();
  acked_ = sent_upto_ = *acked;
  dirty_ = true;
  return {};
}

int64_t EventSender::on_connection(bool connected) {
  connected_ = connected;
  if (!connected) return 0;
  auto acked = ledger_.acked_seq();
  if (acked.ok()) acked_ = sent_upto_ = *acked;  // resend what the cloud has not acknowledged
  int64_t jitter =
      options_.reconnect_jitter_max_ms > 0
          ? static_cast<int64_t>(stable_hash(ledger_.identity().device_id) %
                                 static_cast<uint64_t>(options_.reconnect_jitter_max_ms + 1))
          : 0;
  drain_after_ms_ = clock_.monotonic_ms() + jitter;
  send_budget_ = 0;
  budget_ms_ = drain_after_ms_;
  dirty_ = true;
  return jitter;
}

CommandOutcome EventSender::on_ack(const proto::Ack& ack) {
  const Identity& self = ledger_.identity();
  if (for_other_ledger(ack.ledger_id, self)) {
    return refusals_.refuse("ack", "other_ledger",
                            "ack for ledger " + ack.ledger_id + ", this is " + self.ledger_id);
  }
  auto dropped = ledger_.acknowledge(ack.upto_seq, ack.upto_mac);
  if (!dropped.ok()) {
    if (dropped.error().code == "ledger_regressed") {
      auto started = start_new_ledger("ack up to " + std::to_string(ack.upto_seq), dropped.error());
      if (!started.ok()) {  // the next ack retries
        return refusals_.refuse("ack", "storage", started.error().to_string());
      }
      return CommandOutcome{"ack", "new_ledger", *started};
    }
    return refusals_.refuse("ack", "bad_ack", dropped.error().message);
  }
  acked_ = std::max(acked_, ack.upto_seq);
  sent_upto_ = std::max(sent_upto_, ack.upto_seq);
  VEND_ASSERT(acked_ <= sent_upto_);
  return CommandOutcome{"ack", "done", std::to_string(*dropped)};
}

// The cloud processed events of this ledger that the file does not hold:
// their seqs are taken, by other events. Seqs from 1 under a new id are the
// board-replacement path on the cloud's side (the old ledger retired, a full
// snapshot reconciled); the held events go out again under the new id.
Result<std::string> EventSender::start_new_ledger(const std::string& trigger,
                                                  const Error& regressed) {
  const std::string old_id = ledger_.identity().ledger_id;
  const std::string new_id = random_.id128();
  proto::Fault why{"ledger_regressed",
                   "ledger " + old_id + " went back in time (" + regressed.message +
                       "); its held events continue as ledger " + new_id,
                   0};
  auto last = ledger_.start_new_ledger(new_id, why, clock_.wall_ms());
  if (!last.ok()) return last.error();
  acked_ = sent_upto_ = 0;
  unavailable_reported_at_.reset();
  dirty_ = true;
  log_.warn(kLog, trigger + ": " + why.message);
  return new_id;
}

// Nothing may run for an order this file cannot vouch for: the cloud has
// processed more of this ledger than the file holds (the part it lost may
// have run the order), or names a ledger this file never was (the file is a
// copy of a ledger the cloud has since left). A ledger this file was before
// is one the cloud has not yet seen it leave: refused, nothing more.
std::optional<CommandOutcome> EventSender::fence_dispense(const proto::DispenseCommand& c) {
  if (c.ledger_id.empty()) return std::nullopt;  // an agent that names none
  const Identity& self = ledger_.identity();
  std::string lost;
  if (c.ledger_id == self.ledger_id) {
    Status view = ledger_.check_cloud_view(c.ledger_seq, c.ledger_mac);
    if (view.ok()) return std::nullopt;
    if (view.error().code != "ledger_regressed") {
      return refusals_.refuse("dispense", "storage", view.error().to_string());
    }
    lost = view.error().message;
  } else {
    auto was = ledger_.was_ledger(c.ledger_id);
    if (!was.ok()) return refusals_.refuse("dispense", "storage", was.error().to_string());
    if (*was) {
      return refusals_.refuse("dispense", "other_ledger",
                              "order " + c.order_id + " for ledger " + c.ledger_id +
                                  ", which this file left; this is " + self.ledger_id);
    }
    lost = "the cloud's ledger is " + c.ledger_id + ", which this file never was";
  }
  auto started =
      start_new_ledger("dispense for order " + c.order_id, make_error("ledger_regressed", lost));
  if (!started.ok()) return refusals_.refuse("dispense", "storage", started.error().to_string());
  return refusals_.refuse("dispense", "ledger_regressed",
                          "order " + c.order_id + ": " + lost + "; now ledger " + *started);
}

Result<uint64_t> EventSender::oldest_held_seq() {
  auto rows = ledger_.outbox_after(acked_, 1);
  if (!rows.ok()) return rows.error();
  if (!rows->empty()) return rows->front().seq;
  auto last = ledger_.last_seq();
  if (!last.ok()) return last.error();
  return *last + 1;
}

CommandOutcome EventSender::on_resend(const proto::ResendRequest& request) {
  const Identity& self = ledger_.identity();
  if (for_other_ledger(request.ledger_id, self)) {
    return refusals_.refuse(
        "resend", "other_ledger",
        "resend for ledger " + request.ledger_id + ", this is " + self.ledger_id);
  }
  const std::string from = std::to_string(request.from_seq);
  if (request.from_seq > acked_) {  // still held: publish again from there (the cloud dedups)
    sent_upto_ = std::min(sent_upto_, request.from_seq - 1);
    dirty_ = true;
    return CommandOutcome{"resend", "done", from};
  }
  sent_upto_ = acked_;  // everything held goes out again, oldest first
  dirty_ = true;
  if (unavailable_reported_at_ == acked_) return CommandOutcome{"resend", "duplicate", from};
  if (outbox_full()) return refusals_.refuse("resend", "outbox_full", from);
  auto oldest = oldest_held_seq();
  if (!oldest.ok()) return refusals_.refuse("resend", "storage", oldest.error().to_string());
  proto::EventsUnavailable gone{request.from_seq, *oldest};
  if (auto seq = ledger_.append_event(gone, clock_.wall_ms()); !seq.ok()) {
    return refusals_.refuse("resend", "storage", seq.error().to_string());
  }
  unavailable_reported_at_ = acked_;
  log_.warn(kLog, "cloud asked for events from " + from + ", acknowledged earlier; oldest held " +
                      std::to_string(*oldest));
  return CommandOutcome{"resend", "done", "unavailable"};
}

bool EventSender::outbox_full() {
  auto depth = ledger_.outbox_depth();
  return !depth.ok() || *depth >= options_.outbox_max;
}

void EventSender::check_pressure() {
  int64_t now = clock_.monotonic_ms();
  if (now - last_pressure_check_ms_ < kPressureCheckMs) return;
  last_pressure_check_ms_ = now;
  auto depth = ledger_.outbox_depth();
  if (!depth.ok()) return;
  int64_t high = options_.outbox_max * 8 / 10;
  int64_t low = options_.outbox_max * 6 / 10;
  if (!alarm_ && *depth >= high) {
    alarm_ = true;
    (void)ledger_.append_event(
        proto::Fault{"outbox_near_full",
                     std::to_string(*depth) + " of " + std::to_string(options_.outbox_max) +
                         " events unacknowledged; new work is refused at the limit",
                     0},
        clock_.wall_ms());
    dirty_ = true;
    log_.warn(kLog, "outbox near full: " + std::to_string(*depth));
  } else if (alarm_ && *depth <= low) {
    alarm_ = false;
  }
}

void EventSender::maybe_retransmit(int64_t now) {
  if (sent_upto_ > acked_ && now - last_send_ms_ >= options_.retransmit_ms) {
    sent_upto_ = acked_;  // the cloud has not acknowledged: send again (it dedups by seq)
    dirty_ = true;
  }
}

int EventSender::send_limit(int64_t now) {
  double rate = std::max(1, options_.outbox_drain_per_s);
  send_budget_ = std::min(rate, send_budget_ + static_cast<double>(now - budget_ms_) * rate / 1000);
  budget_ms_ = now;
  int64_t window =
      static_cast<int64_t>(acked_) + options_.outbox_window - static_cast<int64_t>(sent_upto_);
  return static_cast<int>(std::min<int64_t>(window, static_cast<int64_t>(send_budget_)));
}

void EventSender::drain() {
  int64_t now = clock_.monotonic_ms();
  if (!connected_ || now < drain_after_ms_) return;
  maybe_retransmit(now);
  if (!dirty_ && now - last_scan_ms_ < kOutboxScanMs) return;
  last_scan_ms_ = now;
  int limit = send_limit(now);
  if (limit <= 0) return;
  auto rows = ledger_.outbox_after(sent_upto_, limit);
  if (!rows.ok()) return;
  dirty_ = static_cast<int>(rows->size()) == limit;  // more may be waiting
  const std::string topic = topics::device_evt(ledger_.identity().device_id);
  for (const auto& row : *rows) {
    // Only stored, unacknowledged rows go out, oldest first.
    VEND_ASSERT(row.seq > sent_upto_ && row.seq > acked_);
    if (auto s = transport_.publish(Message{topic, row.payload, 1, false}); !s.ok()) {
      dirty_ = true;
      return;  // stays in the outbox; retried on the next tick
    }
    sent_upto_ = row.seq;
    last_send_ms_ = now;
    send_budget_ -= 1;
    ++stats_.events_published;
  }
}

}  // namespace vend::fw
