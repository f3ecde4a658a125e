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
// the device stores every result, or still holds the token. Ask it; after
// dispatch_review_ms without a result, an operator decides.
void AgentCore::State::on_dispatch_deadline(OrderRec& rec) {
  auto* dev = devices.find(rec.order.device);
  if (dev == nullptr) return;
  auto decision = rules::decide_dispatch_deadline(
      rec.order, clock.wall_ms(), options.dispatch_ttl_ms, options.dispatch_review_ms);
  switch (decision.kind) {
    case rules::DeadlineDecision::Kind::kNone: return;
    case rules::DeadlineDecision::Kind::kReview: return send_to_review(rec, decision.settlement);
    case rules::DeadlineDecision::Kind::kCheck: break;
  }
  log.info(detail::kLog, "order " + rec.order.id + " has no result past its deadline; checking " +
                             rec.order.device);
  request_check_snapshot(*dev);
  schedule_deadline(rec, TimerKind::kDispatchDeadline,
                    clock.wall_ms() + options.dispatch_recheck_ms);
}

void AgentCore::State::send_to_review(OrderRec& rec, const rules::Settlement& settlement) {
  if (!writable().ok()) return;  // the recheck tries again
  Changeset changes;
  settle(rec, settlement, changes);
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

// A full snapshot arrived: each of the device's overdue DISPATCHED orders
// is settled or its result asked for again (rules::decide_overdue).
void AgentCore::State::resolve_overdue(DeviceRecord& device, int64_t device_ts_ms,
                                       const proto::Snapshot& snapshot, Changeset& changes) {
  int64_t now = clock.wall_ms();
  std::vector<std::pair<OrderRec*, rules::OverdueDecision>> overdue;
  for (OrderRef ref : orders.open_orders()) {
    OrderRec& rec = *orders.at(ref);
    if (rec.order.device != device.id) continue;
    auto decision =
        rules::decide_overdue(rec.order, snapshot, device_ts_ms, now, options.expiry_skew_ms);
    if (decision.kind != rules::OverdueDecision::Kind::kNone) {
      overdue.emplace_back(&rec, std::move(decision));
    }
  }
  // Applied after the walk: a settled order leaves the open orders.
  for (auto& [rec, decision] : overdue) {
    if (decision.kind == rules::OverdueDecision::Kind::kAskResult) {
      log.info(detail::kLog, "order " + rec->order.id + ": token spent on the device; " +
                                 "asking it to report the result again");
      publish_dispense(*rec);
      continue;
    }
    settle(*rec, decision.settlement, changes);
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
