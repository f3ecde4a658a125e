// AgentCore::State: the stock store behind a circuit breaker
// (docs/stock-store.md "Degradation"). Every call the core makes to the
// store goes through this file, except add_slot's initial load and the
// debug-only check_stock.
//
// The in-memory pool is the truth the counter mirrors; the database's
// conditional token move (UPDATE ... WHERE state='pool', exactly one row) is
// the final guard. So when the store cannot be trusted the core can sell from
// the pool alone and never over-sell; the only cost is that the counter is
// out of date, which a warm-up (counter = pool, under the core lock) repairs.
//
// Why a counter can only ever be BELOW its pool between a failure and the
// next warm-up: a reserve that timed out may still have been applied by
// Redis (the counter went down without a sale), and a release that failed or
// was skipped did not add back. A reserve that failed before reaching Redis
// while the reservation went through the database leaves the counter one
// ABOVE the pool, so its key is marked stale and rewritten from the pool
// before the store is asked about it again. Above-the-pool counters are
// therefore never consulted, and below-the-pool ones only under-sell.
// (One gap remains: a release that timed out but that Redis applies only
// after a later warm-up leaves that counter one above the pool. The pool is
// still checked before a token is taken, so even then nothing over-sells;
// reconciliation repairs the counter.)
#include "agent_state.hpp"

namespace vend::agent {

namespace {

// Failures that mean "the store is not doing its job". invalid_argument is
// a bug of the caller and is returned as it is.
bool is_store_failure(const Error& error) {
  return error.code == "store_unavailable" || error.code == "store_error";
}

}  // namespace

using detail::SlotRec;

// ---- reservations ----------------------------------------------------------------

Result<ReserveResult> AgentCore::State::reserve_stock(const std::string& device, int slot,
                                                      const SlotRec& rec) {
  const std::string key = stock_key(device, slot);
  if (store_usable()) {
    auto r = reserve_in_store(key, rec);
    if (r.ok()) {
      breaker.on_success();
      return r;
    }
    if (!is_store_failure(r.error())) return r;
    // The outcome is unknown (a timed-out reserve may have been applied):
    // the key is stale, and THIS reservation goes through the database.
    store_failed("reserve", key, r.error());
  }
  return reserve_in_database(rec);
}

Result<ReserveResult> AgentCore::State::reserve_in_store(const std::string& key,
                                                         const SlotRec& rec) {
  if (stale_counters.count(key) != 0) {
    // A failed call left the counter unknown: rewrite it from the pool first
    // (the core lock makes pool and counter move together).
    if (auto s = store.load(key, static_cast<int64_t>(rec.pool.size())); !s.ok()) return s.error();
    stale_counters.erase(key);
  }
  auto r = store.reserve(key, 1);
  if (!r.ok() || *r != ReserveResult::kMissing) return r;
  // The store lost the key (never warmed, or wiped): warm it from the pool
  // and retry once.
  log.info(detail::kLog, "warming up " + key + " = " + std::to_string(rec.pool.size()));
  if (auto s = store.load(key, static_cast<int64_t>(rec.pool.size())); !s.ok()) return s.error();
  r = store.reserve(key, 1);
  if (r.ok() && *r == ReserveResult::kMissing) {
    return make_error("store_error", key + " missing right after its warm-up");
  }
  return r;
}

ReserveResult AgentCore::State::reserve_in_database(const SlotRec& rec) {
  // The pool decides; the order's changeset moves the token with the
  // database's conditional UPDATE, which must change exactly one row.
  if (rec.pool.empty()) return ReserveResult::kInsufficient;
  ++counters.reservations_via_database_total;
  return ReserveResult::kOk;
}

void AgentCore::State::release_stock(const std::string& device, int slot, int64_t n) {
  if (n <= 0) return;
  const std::string key = stock_key(device, slot);
  // Not closed, or the key is stale: skip. The warm-up that closes the
  // breaker (or the rewrite of the stale key) sets the counter from the
  // pool, which already holds these tokens. No probe from here: a warm-up
  // now would count the tokens, and the release below would count them twice.
  if (breaker.state() != BreakerState::kClosed || stale_counters.count(key) != 0) return;
  auto s = store.release(key, n);
  if (s.ok()) {
    breaker.on_success();
    return;
  }
  // The counter stays below the pool: it under-sells until rewritten.
  store_failed("release +" + std::to_string(n), key, s.error());
}

// ---- the breaker ---------------------------------------------------------------------

bool AgentCore::State::store_usable() {
  if (breaker.state() == BreakerState::kClosed) return true;
  if (!breaker.allow_call()) return false;  // open and cooling down: no latency at all
  return probe_store();
}

bool AgentCore::State::probe_store() {
  Status s = store.ping();
  if (s.ok()) s = load_all_counters();
  if (!s.ok()) {
    ++counters.store_errors_total;
    breaker.on_failure();
    log.warn(detail::kLog, "stock store probe failed; reservations stay on the database for " +
                               std::to_string(breaker.options().open_ms) +
                               " ms: " + s.error().to_string());
    return false;
  }
  // Every counter now equals its pool; whatever a lost reply or a skipped
  // release did to it before is overwritten.
  stale_counters.clear();
  breaker.on_success();
  log.info(detail::kLog,
           "stock store is back: counters warmed up from the pools; "
           "reservations use it again");
  return true;
}

void AgentCore::State::recover_store() {
  if (started && breaker.state() != BreakerState::kClosed) (void)store_usable();
}

// One load per slot under the core lock, so no reservation or release can
// slip between reading a pool and writing its counter. Stops at the first
// failure: the breaker stays open and the next probe starts again.
Status AgentCore::State::load_all_counters() {
  for (const auto& [id, dev] : devices) {
    for (const auto& [n, slot] : dev.slots) {
      auto s = store.load(stock_key(id, n), static_cast<int64_t>(slot.pool.size()));
      if (!s.ok()) return s;
    }
  }
  return {};
}

// Start-up: every counter from its pool. A store that is down does not stop
// the start: failures count, the breaker opens, and the agent sells through
// the database until the store is back.
void AgentCore::State::warm_up_store() {
  for (const auto& [id, dev] : devices) {
    for (const auto& [n, slot] : dev.slots) {
      // Open: the warm-up that closes the breaker loads every counter.
      if (breaker.state() != BreakerState::kClosed) return;
      (void)sync_counter(id, n, slot, "warm-up");
    }
  }
}

Status AgentCore::State::sync_counter(const std::string& device, int slot, const SlotRec& rec,
                                      const std::string& what) {
  if (breaker.state() != BreakerState::kClosed) return {};
  const std::string key = stock_key(device, slot);
  Status s = store.load(key, static_cast<int64_t>(rec.pool.size()));
  if (!s.ok()) {
    store_failed(what, key, s.error());
    return s;
  }
  stale_counters.erase(key);
  breaker.on_success();
  return {};
}

void AgentCore::State::store_failed(const std::string& what, const std::string& key,
                                    const Error& error) {
  ++counters.store_errors_total;
  stale_counters.insert(key);
  bool was_closed = breaker.state() == BreakerState::kClosed;
  breaker.on_failure();
  std::string line = what + " " + key + ": " + error.to_string();
  if (error.code == "store_error") {
    log.error(detail::kLog, line + " (the store answered against its contract)");
  } else {
    log.warn(detail::kLog, line);
  }
  if (was_closed && breaker.state() == BreakerState::kOpen) {
    log.error(detail::kLog, "stock store circuit OPEN after " +
                                std::to_string(breaker.options().failure_threshold) +
                                " failures in a row: reservations go through the database; "
                                "probe in " +
                                std::to_string(breaker.options().open_ms) + " ms");
  }
}

bool AgentCore::State::counter_trusted(const std::string& key) const {
  return breaker.state() == BreakerState::kClosed && stale_counters.count(key) == 0;
}

void AgentCore::State::fill_store_metrics(AgentMetrics& m) const {
  m.store_state = to_string(breaker.state());
  m.store_breaker_opened_total = breaker.transitions().opened;
  m.store_breaker_half_opened_total = breaker.transitions().half_opened;
  m.store_breaker_closed_total = breaker.transitions().closed;
}

}  // namespace vend::agent
