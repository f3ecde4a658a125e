// AgentCore::State: reconciliation. Every snapshot a device sends (on its own,
// on the agent's staggered periodic request, on demand, or to settle a stuck
// dispatch) is compared slot by slot with the cloud's view:
//
//   cloud  pool + reserved + dispatched     must equal the device's available
//             tokens (count and digest); dispatched tokens the device already
//             consumed are in flight (their result follows), anything else is
//             repaired from the device: tokens the cloud lacks join the pool,
//             tokens the device no longer has leave it (and cancel a
//             reservation that held one)
//   device    physical count                   must equal its available tokens
//             (plus in-flight dispenses); else an alert, never a sale
//
// The snapshot is an event in the device's seq order, so every event before
// it (results, minted tokens) is already applied: the views are comparable
// exactly. A digest mismatch not explained by in-flight dispatches asks for
// the full token list; the exact difference is computed from that.
#include <algorithm>
#include <bit>
#include <unordered_set>

#include "agent_state.hpp"
#include "vend/topics.hpp"

namespace vend::agent {

using detail::DeviceRec;
using detail::HeldTokens;
using detail::OrderRec;
using detail::SlotRec;

namespace {

// In-flight explanations tried on a digest-only snapshot: subsets of the
// slot's dispatched tokens, at most this many digests.
constexpr int kMaxDispatchedForSubsets = 12;
constexpr int kMaxSubsetDigests = 64;

std::string trigger_of(const std::string& request_id) {
  if (request_id.rfind("rec-", 0) == 0) return "periodic";
  if (request_id.rfind("ond-", 0) == 0) return "on_demand";
  if (request_id.rfind("chk-", 0) == 0) return "deadline";
  if (request_id.rfind("gap-", 0) == 0) return "seq_gap";
  if (request_id.rfind("full-", 0) == 0) return "digest_mismatch";
  if (request_id.rfind("prt-", 0) == 0) return "incomplete_snapshot";
  return "device";
}

bool is_token_id(const std::string& t) {
  return t.size() == 32 && std::all_of(t.begin(), t.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// True when the device's digest is the cloud's set less exactly `k` of the
// dispatched tokens (consumed on the device, results not processed yet).
bool explained_by_in_flight(const std::vector<std::string_view>& cloud,
                            const std::vector<std::string>& dispatched, size_t k,
                            const std::string& digest) {
  int n = static_cast<int>(dispatched.size());
  if (k == 0 || k > dispatched.size() || n > kMaxDispatchedForSubsets) return false;
  int tried = 0;
  for (uint32_t mask = 1; mask < (1u << n) && tried < kMaxSubsetDigests; ++mask) {
    if (static_cast<size_t>(std::popcount(mask)) != k) continue;
    ++tried;
    std::unordered_set<std::string_view> gone;
    for (int i = 0; i < n; ++i) {
      if (mask & (1u << i)) gone.insert(dispatched[static_cast<size_t>(i)]);
    }
    std::vector<std::string_view> rest;
    rest.reserve(cloud.size());
    for (const auto& t : cloud) {
      if (gone.count(t) == 0) rest.push_back(t);
    }
    if (crypto::token_digest_of_views(rest) == digest) return true;
  }
  return false;
}

int verdict_rank(const std::string& verdict) {
  if (verdict == "alert") return 3;
  if (verdict == "pending") return 2;
  if (verdict == "repaired") return 1;
  return 0;  // match, in_flight
}

const char* report_verdict(int rank) {
  static const char* kNames[] = {"ok", "repaired", "pending", "alert"};
  return kNames[rank];
}

}  // namespace

std::map<int, HeldTokens> AgentCore::State::held_tokens(const std::string& device) {
  std::map<int, HeldTokens> out;
  for (const auto& id : open_orders) {
    const OrderRec& rec = orders.at(id);
    if (rec.order.device != device) continue;
    HeldTokens& h = out[rec.order.slot];
    if (rec.order.state == OrderState::kDispatched) {
      h.dispatched.push_back(rec.order.token);
    } else {
      h.reserved.push_back(rec.order.token);
    }
  }
  return out;
}

void AgentCore::State::reconcile(DeviceRec& device, const proto::DeviceEvent& event,
                                 const proto::Snapshot& snapshot, Changeset& changes) {
  ops::ReconcileReport report;
  report.id = "rpt-" + random.id128().substr(0, 16);
  report.device = device.id;
  report.ts_ms = clock.wall_ms();
  report.trigger = trigger_of(snapshot.request_id);
  report.request_id = snapshot.request_id;
  report.snapshot_seq = event.seq;
  report.full = std::any_of(snapshot.slots.begin(), snapshot.slots.end(),
                            [](const proto::SlotSnapshot& s) { return s.tokens.has_value(); });

  auto held = held_tokens(device.id);
  int rank = 0;
  for (const auto& seen : snapshot.slots) {
    auto it = device.slots.find(seen.slot);
    if (it == device.slots.end()) {
      ops::SlotReconcile r;
      r.slot = seen.slot;
      r.physical_count = seen.physical_count;
      r.device_tokens = seen.available_tokens;
      r.verdict = "alert";
      raise_alert(device.id, seen.slot, "unknown_slot", "warning",
                  "the device reports slot " + std::to_string(seen.slot) +
                      " which the cloud does not sell; define it with PUT .../slots");
      report.slots.push_back(std::move(r));
      rank = 3;
      continue;
    }
    clear_alert(device.id, seen.slot, "unknown_slot");
    auto r = reconcile_slot(device, it->second, seen, held[seen.slot], changes);
    rank = std::max(rank, verdict_rank(r.verdict));
    report.slots.push_back(std::move(r));
  }
  report.verdict = report_verdict(rank);
  if (report.trigger == "seq_gap") clear_alert(device.id, 0, "seq_gap");
  device.outbox_depth = snapshot.outbox_depth;
  device.snapshot_at_ms = report.ts_ms;
  device.last_verdict = report.verdict;
  device.last_report = ops::encode(report);
  changes.put_reconcile_report(device.id, device.last_report, report.ts_ms);
  publish_ops(topics::ops_reconcile(device.id), device.last_report, 1, true);
  ++counters.reconcile_runs_total;
  mark_device_dirty(device.id);
  if (rank == 1 || rank == 3) {
    log.warn(detail::kLog, "reconcile " + device.id + " (" + report.trigger +
                               "): " + report.verdict + "; see GET /v1/reconcile/" + device.id);
  }
}

ops::SlotReconcile AgentCore::State::reconcile_slot(DeviceRec& device, SlotRec& slot,
                                                    const proto::SlotSnapshot& seen,
                                                    const HeldTokens& held, Changeset& changes) {
  ops::SlotReconcile out;
  out.slot = seen.slot;
  out.physical_count = seen.physical_count;
  out.device_tokens = seen.available_tokens;
  slot.physical_count = seen.physical_count;
  slot.device_tokens = seen.available_tokens;

  std::vector<std::string_view> cloud(slot.pool.begin(), slot.pool.end());
  cloud.insert(cloud.end(), held.reserved.begin(), held.reserved.end());
  cloud.insert(cloud.end(), held.dispatched.begin(), held.dispatched.end());
  out.digest_match = static_cast<size_t>(seen.available_tokens) == cloud.size() &&
                     seen.digest == crypto::token_digest_of_views(cloud);
  int64_t in_flight = 0;  // dispatched tokens the device already consumed
  bool pending = false;
  if (!out.digest_match) {
    if (seen.tokens) {
      in_flight = reconcile_tokens(device, slot, *seen.tokens, held, changes, out);
    } else {
      size_t k = cloud.size() > static_cast<size_t>(seen.available_tokens)
                     ? cloud.size() - static_cast<size_t>(seen.available_tokens)
                     : 0;
      if (explained_by_in_flight(cloud, held.dispatched, k, seen.digest)) {
        in_flight = static_cast<int64_t>(k);
      } else {
        pending = true;
        out.actions.push_back("token digest differs: full token list requested");
        request_check_snapshot(device, "full-");
      }
    }
  }

  out.pool = static_cast<int64_t>(slot.pool.size());
  out.reserved = slot.reserved;
  out.dispatched = slot.dispatched;

  check_physical(device, seen, in_flight, out);
  if (alert_active(device.id, seen.slot, "physical_mismatch") ||
      alert_active(device.id, seen.slot, "token_resurrected")) {
    out.verdict = "alert";
  } else if (pending) {
    out.verdict = "pending";
  } else if (!out.actions.empty()) {
    out.verdict = "repaired";
  } else {
    out.verdict = in_flight > 0 ? "in_flight" : "match";
  }
  return out;
}

int64_t AgentCore::State::reconcile_tokens(DeviceRec& device, SlotRec& slot,
                                           const std::vector<std::string>& device_tokens,
                                           const HeldTokens& held, Changeset& changes,
                                           ops::SlotReconcile& out) {
  std::unordered_set<std::string> on_device(device_tokens.begin(), device_tokens.end());
  std::unordered_set<std::string> in_cloud(slot.pool.begin(), slot.pool.end());
  std::vector<std::string> lost;
  for (const auto& t : slot.pool) {
    if (on_device.count(t) == 0) lost.push_back(t);
  }
  for (const auto& t : held.reserved) {
    in_cloud.insert(t);
    if (on_device.count(t) == 0) lost.push_back(t);
  }
  int64_t in_flight = 0;
  for (const auto& t : held.dispatched) {
    in_cloud.insert(t);
    if (on_device.count(t) == 0) ++in_flight;  // consumed; its result follows
  }
  std::vector<std::string> extra;
  for (const auto& t : device_tokens) {
    if (in_cloud.count(t) == 0) extra.push_back(t);
  }
  if (!lost.empty()) remove_lost_tokens(device, slot, lost, changes, out);
  if (!extra.empty()) add_missing_tokens(device, slot, extra, changes, out);
  if (lost.empty() && extra.empty()) {
    clear_alert(device.id, out.slot, "token_resurrected");
  }
  return in_flight;
}

// Tokens the cloud sells or holds but the device no longer has: leave the
// pool (burned); a reservation holding one can never be dispensed, so it is
// cancelled (a payment arriving later is refunded as for any cancelled order).
void AgentCore::State::remove_lost_tokens(DeviceRec& device, SlotRec& slot,
                                          const std::vector<std::string>& lost, Changeset& changes,
                                          ops::SlotReconcile& out) {
  std::unordered_set<std::string> gone(lost.begin(), lost.end());
  int64_t from_pool = 0;
  int64_t cancelled = 0;
  std::deque<std::string> kept;
  for (auto& t : slot.pool) {
    if (gone.count(t) == 0) {
      kept.push_back(std::move(t));
      continue;
    }
    token_owner.erase(t);
    changes.move_token(t, TokenState::kPool, TokenState::kBurned, "");
    ++slot.burned;
    ++from_pool;
    gone.erase(t);
  }
  slot.pool = std::move(kept);
  for (const auto& t : gone) {  // held by RESERVED orders
    auto owner = token_owner.find(t);
    OrderRec* rec = owner == token_owner.end() ? nullptr : find_order(owner->second);
    if (rec == nullptr || rec->order.state != OrderState::kReserved) continue;
    --slot.reserved;
    ++slot.burned;
    changes.move_token(t, TokenState::kReserved, TokenState::kBurned, rec->order.id);
    rec->order.reason = "token_lost";
    set_state(*rec, OrderState::kCancelled, changes, "its token is no longer on the device");
    ++cancelled;
  }
  int64_t removed = from_pool + cancelled;
  out.tokens_removed = removed;
  counters.tokens_removed_total += removed;
  out.actions.push_back("removed " + std::to_string(removed) +
                        " tokens the device no longer has (" + std::to_string(cancelled) +
                        " reservations cancelled)");
  log.warn(detail::kLog,
           device.id + " slot " + std::to_string(out.slot) + ": " + out.actions.back());
}

// Tokens the device holds that the cloud lacks (a lost tokens event, a
// restored database). The snapshot is signed by the device; a token is added
// only if it is well-formed and the cloud never saw it. One the cloud knows
// as spent (sold, burned) is not sold again: an alert.
void AgentCore::State::add_missing_tokens(DeviceRec& device, SlotRec& slot,
                                          const std::vector<std::string>& extra, Changeset& changes,
                                          ops::SlotReconcile& out) {
  std::vector<std::string> candidates;
  int64_t malformed = 0;
  for (const auto& t : extra) {
    if (is_token_id(t)) {
      candidates.push_back(t);
    } else {
      ++malformed;
    }
  }
  auto fresh = fresh_tokens(candidates);
  if (!fresh.ok()) {
    out.actions.push_back("could not check " + std::to_string(candidates.size()) +
                          " unknown tokens: " + fresh.error().message);
    return;
  }
  int64_t known = static_cast<int64_t>(candidates.size() - fresh->size()) + malformed;
  if (!fresh->empty()) {
    for (const auto& t : *fresh) {
      slot.pool.push_back(t);
      token_owner[t] = "";
    }
    changes.insert_pool_tokens(device.id, out.slot, "reconcile", *fresh);
    out.tokens_added = static_cast<int64_t>(fresh->size());
    counters.tokens_added_total += out.tokens_added;
    out.actions.push_back("added " + std::to_string(fresh->size()) +
                          " tokens the cloud lacked to the pool");
    log.warn(detail::kLog,
             device.id + " slot " + std::to_string(out.slot) + ": " + out.actions.back());
  }
  if (known > 0) {
    raise_alert(device.id, out.slot, "token_resurrected", "critical",
                std::to_string(known) +
                    " tokens available on the device are spent or malformed in the cloud; "
                    "not sold (restored device ledger?)");
  } else {
    clear_alert(device.id, out.slot, "token_resurrected");
  }
}

// Items in the slot vs tokens for them. Dispensing ones (token consumed, item
// not dropped yet) explain a surplus of items; anything else needs a person:
// more items than tokens (loaded outside a restock, a jam left one behind) are
// never sold; fewer items than tokens mean sales that will fail empty.
void AgentCore::State::check_physical(const DeviceRec& device, const proto::SlotSnapshot& seen,
                                      int64_t in_flight, ops::SlotReconcile& out) {
  int64_t diff = static_cast<int64_t>(seen.physical_count) - seen.available_tokens;
  if (diff == 0 || (diff > 0 && diff <= in_flight)) {
    clear_alert(device.id, seen.slot, "physical_mismatch");
    return;
  }
  std::string message =
      "slot " + std::to_string(seen.slot) + " holds " + std::to_string(seen.physical_count) +
      " items but " + std::to_string(seen.available_tokens) + " sale tokens" +
      (diff > 0 ? ": items loaded outside a restock or left by a jam; they are not sold"
                : ": some sales will fail empty; check the slot");
  if (!alert_active(device.id, seen.slot, "physical_mismatch")) {
    out.actions.push_back("alert: " + message);
  }
  raise_alert(device.id, seen.slot, "physical_mismatch", diff > 0 ? "warning" : "critical",
              message);
}

}  // namespace vend::agent
