// AgentCore::State: time. The timing wheel fires reservation and dispatch
// deadlines (wall-clock ms, as stored with the orders); a periodic sweep
// over the open orders is the backstop for any deadline the wheel missed.
#include <algorithm>
#include <vector>

#include "agent_state.hpp"

namespace vend::agent {

namespace {
// At most one check snapshot request per device this often, however many
// of its orders are overdue at once.
constexpr int64_t kMinCheckIntervalMs = 1000;
}  // namespace

void AgentCore::State::tick_locked() {
  if (!started) return;
  for (const FiredTimer& timer : deadlines.advance(clock.wall_ms())) fire_timer(timer);
  int64_t now = clock.monotonic_ms();
  if (now - last_sweep_mono_ms >= options.sweep_interval_ms) {
    last_sweep_mono_ms = now;
    sweep();
  }
  evict_finished();
  publish_ops_views();
  reject_log.flush();
  probe_presence();
}

// A DISPATCHED order without a result past expires_at + skew. Do not guess:
// the device stores every result, or still holds the token. Ask it.
void AgentCore::State::on_dispatch_deadline(OrderRec& rec) {
  if (rec.order.state != OrderState::kDispatched) return;
  auto* dev = devices.find(rec.order.device);
  if (dev == nullptr) return;
  int64_t dispatched_ms = rec.order.dispatch_expires_at_ms - options.dispatch_ttl_ms;
  if (clock.wall_ms() >= dispatched_ms + options.dispatch_review_ms) {
    return send_to_review(rec);
  }
  log.info(detail::kLog, "order " + rec.order.id + " has no result past its deadline; checking " +
                             rec.order.device);
  request_check_snapshot(*dev);
  schedule_deadline(rec, TimerKind::kDispatchDeadline,
                    clock.wall_ms() + options.dispatch_recheck_ms);
}

// No result for so long that a person must decide: the device may be gone
// for good. The token is burned (never sold again; reconciliation raises it
// if the device still holds it) and the order waits for an operator.
void AgentCore::State::send_to_review(OrderRec& rec) {
  if (!writable().ok()) return;  // the recheck tries again
  Changeset changes;
  token_spent(rec, TokenState::kBurned, changes);
  rec.order.reason = "no_result";
  set_state(rec, OrderState::kNeedsReview, changes,
            "no result from " + rec.order.device + " for " +
                std::to_string(options.dispatch_review_ms / 1000) + " s");
  rec.last_write = commit(std::move(changes));
  log.warn(detail::kLog,
           "order " + rec.order.id + ": no result from " + rec.order.device + "; NEEDS_REVIEW");
}

void AgentCore::State::request_check_snapshot(DeviceRecord& device, const char* prefix) {
  // Offline, a request would only queue up; the recheck asks again later.
  if (!device.online) return;
  int64_t now = clock.wall_ms();
  if (!detail::take_turn(device.check_requested_ms, now, kMinCheckIntervalMs)) return;
  proto::SnapshotRequest request{device.id, prefix + random.id128().substr(0, 16), true};
  (void)publish_command(device, request);
}

// A full snapshot arrived. For each of the device's overdue DISPATCHED
// orders: if the device's clock was already past the command's expiry when
// it took the snapshot, the command can never run any more; then a token
// still available means the command never ran (FAILED -> REFUNDED, token
// back), and a token gone means a result is on its way (keep waiting).
void AgentCore::State::resolve_overdue(DeviceRecord& device, int64_t device_ts_ms,
                                       const proto::Snapshot& snapshot, Changeset& changes) {
  int64_t now = clock.wall_ms();
  std::vector<OrderRec*> overdue;
  for (OrderRef ref : orders.open_orders()) {
    OrderRec& rec = *orders.at(ref);
    if (rec.order.device != device.id || rec.order.state != OrderState::kDispatched) continue;
    int64_t cutoff = rec.order.dispatch_expires_at_ms + options.expiry_skew_ms;
    if (now >= cutoff && device_ts_ms > cutoff) overdue.push_back(&rec);
  }
  for (OrderRec* rec : overdue) {
    auto slot =
        std::find_if(snapshot.slots.begin(), snapshot.slots.end(),
                     [&](const proto::SlotSnapshot& s) { return s.slot == rec->order.slot; });
    if (slot == snapshot.slots.end() || !slot->tokens) continue;
    const auto& tokens = *slot->tokens;
    if (std::find(tokens.begin(), tokens.end(), rec->order.token) == tokens.end()) {
      // Spent: the device stored a result. Sending the (expired) command
      // again makes it report that stored result once more (it never runs a
      // known order twice), in case the first report was lost.
      log.info(detail::kLog, "order " + rec->order.id + ": token spent on the device; " +
                                 "asking it to report the result again");
      publish_dispense(*rec);
      continue;
    }
    token_to_pool(*rec, TokenState::kDispatched, changes);
    rec->order.reason = "never_dispensed";
    set_state(*rec, OrderState::kFailed, changes, "expired unused on the device");
    refund_order(*rec, "never_dispensed", changes);
    log.info(detail::kLog, "order " + rec->order.id + " never ran on " + device.id +
                               ": refunded, token back in the pool");
  }
}

void AgentCore::State::on_resend(OrderRec& rec) {
  if (rec.order.state != OrderState::kDispatched) return;
  if (clock.wall_ms() >= rec.order.dispatch_expires_at_ms) return;  // the deadline check takes over
  publish_dispense(rec);
}

void AgentCore::State::sweep() {
  int64_t now = clock.wall_ms();
  for (OrderRef ref : orders.open_orders()) {
    OrderRec* rec = orders.at(ref);
    if (rec == nullptr) continue;
    const Order& o = rec->order;
    if (o.state == OrderState::kReserved && now >= o.reserve_deadline_ms) {
      expire_reservation(*rec, "reservation expired");
    } else if (o.state == OrderState::kDispatched && !rec->deadline_timer.pending() &&
               now >= o.dispatch_expires_at_ms + options.expiry_skew_ms) {
      on_dispatch_deadline(*rec);
    }
  }
}

}  // namespace vend::agent
