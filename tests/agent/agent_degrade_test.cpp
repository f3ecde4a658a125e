// The agent core with its stock store failing (docs/stock-store.md
// "Degradation"): a fault-injecting StockStore around an EmbeddedStockStore,
// on the rig's virtual time. Sales go on through the database, never more
// than the pool; the breaker opens, probes, warms every counter up and
// closes; with the repository failing as well, orders are refused before
// the store is touched.
#include <doctest/doctest.h>

#include <string>

#include "agent_rig.hpp"
#include "metrics.hpp"
#include "vend/agent/agent_core.hpp"
#include "vend/sqlite.hpp"

using namespace vend;
using namespace vend::agent;
using vend::agent::test::AgentRig;

namespace {

constexpr int64_t kOpenMs = 1000;
const std::vector<SlotSpec> kSlots = {{1, "cola", 150, 20}, {2, "water", 90, 5}};

// Every call is counted. While `fail_code` is set, every call fails with it
// and never reaches the inner store (a dead or broken Redis); `fail_next`
// fails just that many calls. With `apply_then_fail` a failing reserve IS
// applied to the inner store before it reports the error (a reply lost to a
// timeout).
class FaultyStockStore final : public StockStore {
 public:
  explicit FaultyStockStore(StockStore& inner) : inner_(inner) {}

  Result<ReserveResult> reserve(std::string_view key, int64_t n) override {
    if (!failing()) return inner_.reserve(key, n);
    if (apply_then_fail) (void)inner_.reserve(key, n);
    return fault();
  }
  Status release(std::string_view key, int64_t n) override {
    if (failing()) return fault();
    return inner_.release(key, n);
  }
  Status load(std::string_view key, int64_t value) override {
    if (failing()) return fault();
    return inner_.load(key, value);
  }
  Result<std::vector<std::optional<int64_t>>> mget(const std::vector<std::string>& keys) override {
    if (failing()) return fault();
    return inner_.mget(keys);
  }
  Status remove(std::string_view key) override {
    if (failing()) return fault();
    return inner_.remove(key);
  }
  Status flush_all() override {
    if (failing()) return fault();
    return inner_.flush_all();
  }
  Status ping() override {
    if (failing()) return fault();
    return inner_.ping();
  }

  std::string fail_code;  // "" = healthy
  int fail_next = 0;
  bool apply_then_fail = false;
  int64_t calls = 0;

 private:
  bool failing() {
    ++calls;
    if (fail_next > 0) {
      --fail_next;
      return true;
    }
    return !fail_code.empty();
  }
  Error fault() const {
    return Error{fail_code.empty() ? "store_unavailable" : fail_code, "injected fault"};
  }

  StockStore& inner_;
};

AgentOptions degrade_options() {
  AgentOptions o = vend::agent::test::test_agent_options();
  o.reservation_ttl_ms = 60'000;  // reservations stay put while the test runs
  o.store_breaker = {3, kOpenMs};
  return o;
}

// The core over a FaultyStockStore; `inner` is what the store really holds.
struct Degrade {
  Degrade() : faulty(inner), rig(degrade_options(), &faulty) {}

  void stock(int count) {
    rig.add_device("vm-1", kSlots);
    REQUIRE(rig.online("vm-1"));
    rig.devices.back()->restock(1, count);
    REQUIRE(rig.run_until([&] { return rig.slot("vm-1", 1).pool == count; }));
  }

  int64_t inner_counter(int slot) {
    auto v = inner.mget({stock_key("vm-1", slot)});
    REQUIRE(v.ok());
    return (*v)[0].value_or(-1);
  }

  // Reservations of slot 1 until the first refusal; returns how many succeeded.
  int reserve_all(int attempts) {
    int ok = 0;
    for (int i = 0; i < attempts; ++i) {
      auto o = rig.core->create_order("vm-1", 1, "", "");
      if (o.ok()) {
        ++ok;
        ids.push_back(o->id);
      } else {
        CHECK(o.error().code == "sold_out");
      }
    }
    return ok;
  }

  // Ticks on virtual time until the breaker has closed again.
  bool recovered() {
    return rig.run_until([&] { return rig.core->store_state() == "closed"; }, 3 * kOpenMs);
  }

  EmbeddedStockStore inner;
  FaultyStockStore faulty;
  AgentRig rig;
  std::vector<std::string> ids;
};

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("store down: sales go through the database, never past the pool; then it recovers") {
  Degrade d;
  d.stock(5);
  REQUIRE(d.inner_counter(1) == 5);
  d.faulty.fail_code = "store_unavailable";
  d.faulty.calls = 0;

  CHECK(d.reserve_all(8) == 5);  // exactly the pool, never more
  CHECK(d.rig.slot("vm-1", 1).pool == 0);
  CHECK(d.rig.slot("vm-1", 1).reserved == 5);
  // Three failures opened the breaker; after that the store was not called.
  CHECK(d.faulty.calls == 3);
  AgentMetrics m = d.rig.core->take_metrics();
  CHECK(m.store_state == "open");
  CHECK(m.reservations_via_database_total == 5);
  CHECK(m.reservations_total == 5);
  CHECK(m.store_errors_total == 3);
  CHECK(m.store_breaker_opened_total == 1);
  AgentHealth health;
  health.mqtt_connected = true;
  std::string text = MetricsExporter().render(m, health);
  CHECK(has_line(text, "vend_store_breaker_state{state=\"open\"} 1"));
  CHECK(has_line(text, "vend_store_breaker_state{state=\"closed\"} 0"));
  CHECK(has_line(text, "vend_store_breaker_transitions_total{to=\"open\"} 1"));
  CHECK(has_line(text, "vend_reservations_via_database_total 5"));
  CHECK(has_line(text, "# TYPE vend_store_breaker_state gauge"));

  // While open: a cancel skips the store (the warm-up will count its token).
  REQUIRE(d.rig.core->cancel(d.ids[0]).ok());
  REQUIRE(d.rig.core->cancel(d.ids[1]).ok());
  CHECK(d.faulty.calls == 3);
  CHECK(d.inner_counter(1) == 5);  // stale, and never consulted

  SUBCASE("still down at the probe: it opens again, and sales go on") {
    REQUIRE(d.rig.run_until([&] { return d.faulty.calls > 3; }, 2 * kOpenMs));
    CHECK(d.rig.core->store_state() == "open");
    CHECK(d.rig.core->take_metrics().store_breaker_opened_total == 2);
    CHECK(d.reserve_all(3) == 2);
  }
  SUBCASE("back: tick() probes, warms every counter up and closes") {
    d.faulty.fail_code.clear();
    REQUIRE(d.recovered());
    CHECK(d.inner_counter(1) == 2);  // == the pool, not the stale 5
    CHECK(d.inner_counter(2) == 0);
    d.rig.check_stock_invariant();
    m = d.rig.core->take_metrics();
    CHECK(m.store_breaker_half_opened_total == 1);
    CHECK(m.store_breaker_closed_total == 1);
    // Reservations use the store again.
    CHECK(d.reserve_all(1) == 1);
    CHECK(d.inner_counter(1) == 1);
    CHECK(d.rig.core->take_metrics().reservations_via_database_total == 5);
    d.rig.check_stock_invariant();
  }
}

TEST_CASE("one failure below the threshold: that reservation falls back, the key is rewritten") {
  Degrade d;
  d.stock(5);
  SUBCASE("the failed reserve was not applied") {}
  SUBCASE("the failed reserve was applied (its reply was lost)") {
    d.faulty.apply_then_fail = true;
  }
  d.faulty.fail_next = 1;
  CHECK(d.reserve_all(1) == 1);
  CHECK(d.rig.core->store_state() == "closed");
  CHECK(d.rig.core->take_metrics().reservations_via_database_total == 1);
  CHECK(d.rig.slot("vm-1", 1).pool == 4);
  // The next reservation rewrites the stale counter from the pool first.
  CHECK(d.reserve_all(1) == 1);
  CHECK(d.inner_counter(1) == 3);
  CHECK(d.rig.core->take_metrics().reservations_via_database_total == 1);
  d.rig.check_stock_invariant();
}

TEST_CASE("a store that answers against its contract also falls back") {
  Degrade d;
  d.stock(2);
  d.faulty.fail_code = "store_error";
  CHECK(d.reserve_all(4) == 2);
  CHECK(d.rig.core->store_state() == "open");
  CHECK(d.rig.core->take_metrics().reservations_via_database_total == 2);
}

TEST_CASE("a wiped store warms its missing keys up and goes on through the store") {
  Degrade d;
  d.stock(4);
  REQUIRE(d.inner.flush_all().ok());
  CHECK(d.inner_counter(1) == -1);
  CHECK(d.reserve_all(1) == 1);
  CHECK(d.inner_counter(1) == 3);
  CHECK(d.rig.core->store_state() == "closed");
  CHECK(d.rig.core->take_metrics().reservations_via_database_total == 0);
  CHECK(d.inner_counter(2) == -1);  // warmed up when it is next used
}

TEST_CASE("store and repository both failing: unavailable at once, nothing moved") {
  Degrade d;
  d.stock(3);
  auto o = d.rig.core->create_order("vm-1", 1, "", "");
  REQUIRE(o.ok());
  {
    // The log refuses the cancel's conditional UPDATE: storage fails.
    auto db = sql::Database::open(d.rig.dir.file("agent.db"));
    REQUIRE(db.ok());
    d.rig.repo->flush();
    REQUIRE(db->exec("UPDATE orders SET state = 'CANCELLED' WHERE id = '" + o->id + "'").ok());
  }
  REQUIRE(d.rig.core->cancel(o->id).ok());
  d.rig.repo->flush();
  REQUIRE_FALSE(d.rig.core->health().ok());
  d.faulty.fail_code = "store_unavailable";
  int64_t calls = d.faulty.calls;
  int64_t counter = d.inner_counter(1);
  int64_t pool = d.rig.slot("vm-1", 1).pool;

  for (int i = 0; i < 5; ++i) {
    auto refused = d.rig.core->create_order("vm-1", 1, "", "");
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.error().code == "unavailable");
  }
  CHECK(d.faulty.calls == calls);  // the store was never touched
  CHECK(d.inner_counter(1) == counter);
  CHECK(d.rig.slot("vm-1", 1).pool == pool);
  CHECK(d.rig.core->take_metrics().reservations_via_database_total == 0);
}

TEST_CASE("store down at start-up: the core starts, the breaker opens, it recovers") {
  Degrade d;
  d.stock(6);
  d.rig.crash_agent();  // the store is wiped with the agent
  d.faulty.fail_code = "store_unavailable";
  d.rig.start_agent();  // REQUIREs start() ok
  REQUIRE(d.rig.run_until([&] { return d.rig.online("vm-1"); }));
  AgentMetrics m = d.rig.core->take_metrics();
  CHECK(m.store_errors_total == 2);  // both slots' warm-ups failed
  CHECK(m.store_state == "closed");
  CHECK(d.reserve_all(1) == 1);  // the third failure: through the database
  CHECK(d.rig.core->store_state() == "open");
  CHECK(d.reserve_all(1) == 1);

  d.faulty.fail_code.clear();
  REQUIRE(d.recovered());
  CHECK(d.inner_counter(1) == 4);
  CHECK(d.inner_counter(2) == 0);
  CHECK(d.reserve_all(1) == 1);
  CHECK(d.inner_counter(1) == 3);
  d.rig.check_stock_invariant();
}
