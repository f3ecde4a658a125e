// The comparison of reconcile.hpp. Strings for the report and the alerts
// are built here so the core only applies what comes back.
#include "reconcile/reconcile.hpp"

#include <algorithm>
#include <bit>
#include <unordered_set>

#include "vend/crypto.hpp"

namespace vend::agent::reconcile {

namespace {

// In-flight explanations tried on a digest-only snapshot: subsets of the
// slot's dispatched tokens, at most this many digests.
constexpr int kMaxDispatchedForSubsets = 12;
constexpr int kMaxSubsetDigests = 64;

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
  static constexpr const char* kNames[] = {"ok", "repaired", "pending", "alert"};
  return kNames[rank];
}

AlertChange raise(int slot, std::string code, std::string severity, std::string message) {
  return {slot, std::move(code), true, std::move(severity), std::move(message)};
}

AlertChange clear(int slot, std::string code) { return {slot, std::move(code), false, "", ""}; }

// One slot's working state while it is compared.
struct SlotRun {
  const proto::SlotSnapshot& seen;
  const CloudSlot& cloud;
  const FreshLookup& fresh;
  std::unordered_set<std::string>& added_before;  // joined a pool earlier in this run
  SlotChanges changes;
  ops::SlotReconcile out;
  bool resurrected_alert = false;  // token_resurrected active after this slot
};

// Tokens the cloud sells or holds but the device no longer has: burned from
// the pool; a RESERVED order holding one can never be dispensed: cancelled.
void remove_lost(SlotRun& run, const std::vector<std::string>& lost_pool,
                 const std::vector<const HeldToken*>& lost_held) {
  run.changes.burn_from_pool = lost_pool;
  for (const HeldToken* h : lost_held) {
    if (h->cancellable) run.changes.cancel.push_back(*h);
  }
  auto cancelled = static_cast<int64_t>(run.changes.cancel.size());
  run.out.tokens_removed = static_cast<int64_t>(lost_pool.size()) + cancelled;
  run.out.actions.push_back("removed " + std::to_string(run.out.tokens_removed) +
                            " tokens the device no longer has (" + std::to_string(cancelled) +
                            " reservations cancelled)");
  run.changes.warnings.push_back(run.out.actions.back());
}

// Tokens the device holds that the cloud lacks (a lost tokens event, a
// restored database). Only a well-formed token the cloud never saw joins the
// pool; one it knows as spent (sold, burned) is not sold again: an alert.
void add_missing(SlotRun& run, const std::vector<std::string>& extra) {
  std::vector<std::string> candidates;
  int64_t malformed = 0;
  for (const auto& t : extra) {
    if (is_token_id(t)) {
      candidates.push_back(t);
    } else {
      ++malformed;
    }
  }
  std::set<std::string> never_seen;
  if (!candidates.empty() && run.fresh) {
    auto looked_up = run.fresh(run.seen.slot, candidates);
    if (!looked_up.ok()) {
      run.out.actions.push_back("could not check " + std::to_string(candidates.size()) +
                                " unknown tokens: " + looked_up.error().message);
      return;
    }
    never_seen = std::move(looked_up).value();
  }
  std::vector<std::string> fresh;
  for (const auto& t : candidates) {
    if (never_seen.count(t) != 0 && run.added_before.insert(t).second) fresh.push_back(t);
  }
  int64_t known = static_cast<int64_t>(candidates.size() - fresh.size()) + malformed;
  if (!fresh.empty()) {
    run.out.tokens_added = static_cast<int64_t>(fresh.size());
    run.out.actions.push_back("added " + std::to_string(fresh.size()) +
                              " tokens the cloud lacked to the pool");
    run.changes.warnings.push_back(run.out.actions.back());
    run.changes.add_to_pool = std::move(fresh);
  }
  if (known > 0) {
    run.changes.alerts.push_back(
        raise(run.seen.slot, "token_resurrected", "critical",
              std::to_string(known) +
                  " tokens available on the device are spent or malformed in the cloud; "
                  "not sold (restored device ledger?)"));
    run.resurrected_alert = true;
  } else {
    run.changes.alerts.push_back(clear(run.seen.slot, "token_resurrected"));
    run.resurrected_alert = false;
  }
}

// Token-list differences of a full snapshot; returns how many dispatched
// tokens the device has already consumed (in flight).
int64_t compare_tokens(SlotRun& run, const std::vector<std::string>& device_tokens) {
  std::unordered_set<std::string_view> on_device(device_tokens.begin(), device_tokens.end());
  std::unordered_set<std::string_view> in_cloud(run.cloud.pool.begin(), run.cloud.pool.end());
  std::vector<std::string> lost_pool;
  for (const auto& t : run.cloud.pool) {
    if (on_device.count(t) == 0) lost_pool.emplace_back(t);
  }
  std::vector<const HeldToken*> lost_held;
  for (const auto& h : run.cloud.reserved) {
    in_cloud.insert(h.token);
    if (on_device.count(h.token) == 0) lost_held.push_back(&h);
  }
  int64_t in_flight = 0;
  for (const auto& t : run.cloud.dispatched) {
    in_cloud.insert(t);
    if (on_device.count(t) == 0) ++in_flight;  // consumed; its result follows
  }
  std::vector<std::string> extra;
  for (const auto& t : device_tokens) {
    if (in_cloud.count(t) == 0) extra.push_back(t);
  }
  if (!lost_pool.empty() || !lost_held.empty()) remove_lost(run, lost_pool, lost_held);
  if (!extra.empty()) add_missing(run, extra);
  if (lost_pool.empty() && lost_held.empty() && extra.empty()) {
    run.changes.alerts.push_back(clear(run.seen.slot, "token_resurrected"));
    run.resurrected_alert = false;
  }
  return in_flight;
}

// Items in the slot vs tokens for them. Dispensing ones (token consumed, item
// not dropped yet) explain a surplus of items; anything else needs a person:
// more items than tokens (loaded outside a restock, a jam left one behind) are
// never sold; fewer items than tokens mean sales that will fail empty.
// Returns whether physical_mismatch is active afterwards.
bool check_physical(SlotRun& run, int64_t in_flight) {
  const proto::SlotSnapshot& seen = run.seen;
  int64_t diff = static_cast<int64_t>(seen.physical_count) - seen.available_tokens;
  if (diff == 0 || (diff > 0 && diff <= in_flight)) {
    run.changes.alerts.push_back(clear(seen.slot, "physical_mismatch"));
    return false;
  }
  std::string message =
      "slot " + std::to_string(seen.slot) + " holds " + std::to_string(seen.physical_count) +
      " items but " + std::to_string(seen.available_tokens) + " sale tokens" +
      (diff > 0 ? ": items loaded outside a restock or left by a jam; they are not sold"
                : ": some sales will fail empty; check the slot");
  if (!run.cloud.physical_mismatch_alert) run.out.actions.push_back("alert: " + message);
  run.changes.alerts.push_back(
      raise(seen.slot, "physical_mismatch", diff > 0 ? "warning" : "critical", message));
  return true;
}

// The digest comparison, then the token lists or the in-flight explanation.
// Returns the in-flight count; sets `pending` when the lists are needed.
int64_t compare_views(SlotRun& run, bool& pending) {
  const proto::SlotSnapshot& seen = run.seen;
  std::vector<std::string_view> cloud(run.cloud.pool.begin(), run.cloud.pool.end());
  for (const auto& h : run.cloud.reserved) cloud.push_back(h.token);
  cloud.insert(cloud.end(), run.cloud.dispatched.begin(), run.cloud.dispatched.end());
  run.out.digest_match = static_cast<size_t>(seen.available_tokens) == cloud.size() &&
                         seen.digest == crypto::token_digest_of_views(cloud);
  if (run.out.digest_match) return 0;
  if (seen.tokens) return compare_tokens(run, *seen.tokens);
  size_t k = cloud.size() > static_cast<size_t>(seen.available_tokens)
                 ? cloud.size() - static_cast<size_t>(seen.available_tokens)
                 : 0;
  if (explained_by_in_flight(cloud, run.cloud.dispatched, k, seen.digest)) {
    return static_cast<int64_t>(k);
  }
  pending = true;
  run.out.actions.push_back("token digest differs: full token list requested");
  run.changes.request_full_snapshot = true;
  return 0;
}

void reconcile_known(SlotRun& run) {
  run.changes.alerts.push_back(clear(run.seen.slot, "unknown_slot"));
  bool pending = false;
  int64_t in_flight = compare_views(run, pending);
  const CloudSlot& cloud = run.cloud;
  run.out.pool = static_cast<int64_t>(cloud.pool.size() - run.changes.burn_from_pool.size() +
                                      run.changes.add_to_pool.size());
  run.out.reserved = cloud.reserved_count - static_cast<int64_t>(run.changes.cancel.size());
  run.out.dispatched = cloud.dispatched_count;
  bool physical_alert = check_physical(run, in_flight);
  if (physical_alert || run.resurrected_alert) {
    run.out.verdict = "alert";
  } else if (pending) {
    run.out.verdict = "pending";
  } else if (!run.out.actions.empty()) {
    run.out.verdict = "repaired";
  } else {
    run.out.verdict = in_flight > 0 ? "in_flight" : "match";
  }
}

SlotRun start_slot(const proto::SlotSnapshot& seen, const CloudSlot& cloud,
                   const FreshLookup& fresh, std::unordered_set<std::string>& added) {
  SlotRun run{seen, cloud, fresh, added, {}, {}, cloud.token_resurrected_alert};
  run.changes.slot = seen.slot;
  run.changes.physical_count = seen.physical_count;
  run.changes.device_tokens = seen.available_tokens;
  run.out.slot = seen.slot;
  run.out.physical_count = seen.physical_count;
  run.out.device_tokens = seen.available_tokens;
  return run;
}

}  // namespace

std::string trigger_of(std::string_view request_id) {
  if (request_id.starts_with("rec-")) return "periodic";
  if (request_id.starts_with("ond-")) return "on_demand";
  if (request_id.starts_with("chk-")) return "deadline";
  if (request_id.starts_with("gap-")) return "seq_gap";
  if (request_id.starts_with("full-")) return "digest_mismatch";
  if (request_id.starts_with("prt-")) return "incomplete_snapshot";
  return "device";
}

Outcome reconcile(const Input& in) {
  Outcome result;
  ops::ReconcileReport& report = result.report;
  report.id = in.report_id;
  report.device = in.device;
  report.ts_ms = in.now_ms;
  report.trigger = trigger_of(in.snapshot.request_id);
  report.request_id = in.snapshot.request_id;
  report.snapshot_seq = in.snapshot_seq;
  report.full = std::any_of(in.snapshot.slots.begin(), in.snapshot.slots.end(),
                            [](const proto::SlotSnapshot& s) { return s.tokens.has_value(); });
  static const CloudSlot kUnknown;
  std::unordered_set<std::string> added;
  int rank = 0;
  for (const auto& seen : in.snapshot.slots) {
    auto it = in.cloud.find(seen.slot);
    SlotRun run = start_slot(seen, it == in.cloud.end() ? kUnknown : it->second, in.fresh, added);
    if (it == in.cloud.end()) {
      run.out.verdict = "alert";
      run.changes.alerts.push_back(
          raise(seen.slot, "unknown_slot", "warning",
                "the device reports slot " + std::to_string(seen.slot) +
                    " which the cloud does not sell; define it with PUT .../slots"));
    } else {
      run.changes.known = true;
      reconcile_known(run);
    }
    rank = std::max(rank, verdict_rank(run.out.verdict));
    report.slots.push_back(std::move(run.out));
    result.slots.push_back(std::move(run.changes));
  }
  report.verdict = report_verdict(rank);
  if (report.trigger == "seq_gap") result.alerts.push_back(clear(0, "seq_gap"));
  return result;
}

}  // namespace vend::agent::reconcile
