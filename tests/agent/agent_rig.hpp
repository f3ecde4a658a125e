// An agent core on a ManualClock, SeededRandom, a
// temp-dir SQLite repository and an InMemoryBus, with real firmware device
// cores attached to the same bus. Everything runs on the test thread except
// the repository's writer; the loop is: advance the clock, tick every core,
// deliver every message.
#pragma once

#include <doctest/doctest.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/agent_core.hpp"
#include "core/order_calls.hpp"
#include "repository/repository.hpp"
#include "sim_hal/sim_hal.hpp"
#include "test_support.hpp"
#include "vend/clock.hpp"
#include "vend/crypto.hpp"
#include "vend/fw/device_core.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/in_memory_bus.hpp"
#include "vend/log.hpp"
#include "vend/protocol.hpp"
#include "vend/random.hpp"
#include "vend/topics.hpp"

namespace vend::agent::test {

inline constexpr const char* kAgentClient = "vend-agent";
inline constexpr int64_t kSkewMs = 1000;

inline AgentOptions test_agent_options() {
  AgentOptions o;
  o.reservation_ttl_ms = 2000;
  o.dispatch_ttl_ms = 3000;
  o.expiry_skew_ms = kSkewMs;
  o.sweep_interval_ms = 5000;
  o.busy_retry_ms = 200;
  o.ack_interval_ms = 50;
  o.dispatch_recheck_ms = 2000;
  return o;
}

inline fw::CoreOptions test_device_options() {
  fw::CoreOptions o;
  o.expiry_skew_ms = kSkewMs;
  o.reconnect_jitter_max_ms = 0;
  o.snapshot_interval_ms = 0;
  o.retransmit_ms = 1000;
  return o;
}

// The core's runner as the core thread is: it refuses every step while
// `refusing` (its inbox full), and otherwise runs them on `inner`. Set from
// any thread (a test's fake gateway sets it while a request is in flight).
class RefusableRunner final : public CoreRunner {
 public:
  explicit RefusableRunner(CoreRunner& inner) : inner_(inner) {}
  bool run(const std::function<void()>& step) override { return !refusing && inner_.run(step); }
  bool post(std::function<void()> step) override {
    return !refusing && inner_.post(std::move(step));
  }
  std::atomic<bool> refusing{false};

 private:
  CoreRunner& inner_;
};

// The agent's bus client as Paho can be: connected, yet refusing a publish
// (its queue full) for each message `refuse` says so of.
class RefusableTransport final : public Transport {
 public:
  explicit RefusableTransport(Transport& inner) : inner_(inner) {}
  void on_message(MessageHandler handler) override { inner_.on_message(std::move(handler)); }
  void on_connection(ConnectionHandler handler) override {
    inner_.on_connection(std::move(handler));
  }
  Status connect() override { return inner_.connect(); }
  void disconnect() override { inner_.disconnect(); }
  bool connected() const override { return inner_.connected(); }
  Status publish(const Message& message) override {
    if (refuse && refuse(message)) {
      ++refused;
      return make_error("queue_full", "refused by the test");
    }
    return inner_.publish(message);
  }
  Status subscribe(const std::string& filter, int qos) override {
    return inner_.subscribe(filter, qos);
  }
  Status subscribe_many(const std::vector<std::string>& filters, int qos) override {
    return inner_.subscribe_many(filters, qos);
  }
  Status unsubscribe(const std::string& filter) override { return inner_.unsubscribe(filter); }

  std::function<bool(const Message&)> refuse;  // empty: refuse nothing
  int refused = 0;

 private:
  Transport& inner_;
};

// A vending machine: ledger + simulated mechanics + the real DeviceCore on
// its own bus client (persistent session, `offline` last will).
class DeviceSim {
 public:
  DeviceSim(InMemoryBus& bus, ManualClock& clock, std::string path, std::string id, crypto::Key key,
            std::vector<fw::SlotConfig> slots, fw::CoreOptions options = test_device_options())
      : id(std::move(id)),
        key(std::move(key)),
        bus_(bus),
        clock_(clock),
        path_(std::move(path)),
        slots_(std::move(slots)),
        options_(options),
        random(seed_of(this->id)),
        machine(clock, random, fw::SimulatedMachineOptions{50, 0.0}) {}

  // A seed of its own per device (FNV-1a of the id): devices never mint the
  // same tokens, and a run is the same every time.
  static uint64_t seed_of(const std::string& device) {
    uint64_t h = 1469598103934665603ULL;
    for (unsigned char c : device) h = (h ^ c) * 1099511628211ULL;
    return h;
  }

  // Boots a new session: ledger, core, client; connects.
  void boot() {
    core.reset();
    client.reset();
    ledger.reset();
    boot_id = random.id128();
    auto l = fw::Ledger::open(path_, fw::Identity{id, key, boot_id}, sql::Sync::kNormal);
    REQUIRE(l.ok());
    ledger.emplace(std::move(l).value());
    REQUIRE(ledger->sync_slots(slots_).ok());
    Message will = fw::DeviceCore::presence(ledger->identity(), false, clock_.wall_ms());
    client = bus_.make_client(id, Will{will.topic, will.payload, 1, true}, false);
    core = std::make_unique<fw::DeviceCore>(*ledger, machine.hal(), *client, clock_, random, log,
                                            options_);
    client->on_message([this](const Message& m) { core->on_command(m.payload); });
    client->on_connection([this](bool up) { core->on_connection(up); });
    REQUIRE(core->boot().ok());
    REQUIRE(client->connect().ok());
  }

  // Power loss: the broker publishes the will; the ledger file stays.
  void power_cut(bool item_dropped = false) {
    bus_.kill_client(id);
    core.reset();
    client.reset();
    ledger.reset();
    machine.power_cut(item_dropped);
  }

  // The SD card is reflashed (or the board replaced with a blank one, same
  // id and key): the old ledger is gone, the next boot creates a new one
  // whose seq starts at 1. The broker session is the same client id; the
  // items stay in the spirals (the new ledger holds no tokens for them).
  void reflash() {
    power_cut();
    for (const char* suffix : {"", "-wal", "-shm"}) std::remove((path_ + suffix).c_str());
    boot();
  }

  // The firmware is stopped, its ledger file copied to `to` (a backup of
  // the SD card), and started again.
  void back_up_ledger(const std::string& to) {
    power_cut();
    REQUIRE(std::filesystem::copy_file(path_, to));
    boot();
  }

  // The firmware is stopped and an older copy of its ledger file put back
  // (a card restored or cloned from a backup): the ledger id is the same,
  // its seqs are those of the copy. The items in the spirals stay.
  void restore_ledger(const std::string& from) {
    power_cut();
    for (const char* suffix : {"-wal", "-shm"}) std::remove((path_ + suffix).c_str());
    REQUIRE(
        std::filesystem::copy_file(from, path_, std::filesystem::copy_options::overwrite_existing));
    boot();
  }

  // An operator loads `count` items and confirms them at the machine.
  std::vector<std::string> restock(int slot, int count) {
    // Local restock ids are unique per ledger, as vend-firmware's random ones.
    std::string restock_id =
        "local-" + ledger->identity().ledger_id.substr(0, 8) + "-" + std::to_string(++restocks_);
    auto minted = ledger->confirm_restock(restock_id, slot, count, clock_.wall_ms(), random);
    REQUIRE(minted.ok());
    machine.load(slot, count);
    return minted->tokens;
  }

  void tick() {
    if (core) core->tick();
  }

  std::string id;
  crypto::Key key;
  std::string boot_id;

 private:
  InMemoryBus& bus_;
  ManualClock& clock_;
  std::string path_;
  std::vector<fw::SlotConfig> slots_;
  fw::CoreOptions options_;
  int restocks_ = 0;

 public:
  SeededRandom random;
  MemoryLogger log;
  fw::SimulatedMachine machine;
  std::optional<fw::Ledger> ledger;
  std::unique_ptr<InMemoryClient> client;
  std::unique_ptr<fw::DeviceCore> core;
};

class AgentRig {
 public:
  explicit AgentRig(AgentOptions options = test_agent_options()) : options_(options) {
    repo_options.synchronous = sql::Sync::kNormal;
    start_agent();
  }
  ~AgentRig() {
    core.reset();
    transport.reset();
    client.reset();
    repo.reset();
    gate.reset();
    runner.reset();
  }

  void start_agent() {
    auto r = Repository::open(dir.file("agent.db"), repo_options, log);
    REQUIRE(r.ok());
    repo = std::move(r).value();
    runner = std::make_unique<CallerRunner>();
    gate = std::make_unique<RefusableRunner>(*runner);
    client = bus.make_client(kAgentClient, std::nullopt, false);
    transport = std::make_unique<RefusableTransport>(*client);
    core = std::make_unique<AgentCore>(*repo, *transport, clock, random, log, options_, gate.get());
    client->on_message([this](const Message& m) { core->on_message(m); });
    client->on_connection([this](bool up) { core->on_connection(up); });
    // No subscribe here: the core subscribes on every connect.
    REQUIRE(core->start().ok());
    REQUIRE(client->connect().ok());
  }

  // The agent process dies: its session stays with the broker (messages
  // queue), memory is gone; what the repository had queued is committed by
  // its destructor.
  void crash_agent() {
    bus.kill_client(kAgentClient);
    core.reset();
    transport.reset();
    client.reset();
    repo.reset();
    gate.reset();
    runner.reset();
  }

  // The customer's calls, through the asynchronous path the HTTP API takes,
  // answered once durable (core/order_calls.hpp).
  Result<Order> create_order(const std::string& device, int slot, const std::string& client_id,
                             const std::string& idempotency_key) {
    return call_order(*runner, *repo, [&](AgentCore::OrderCallback done) {
      core->create_order_async(device, slot, client_id, idempotency_key, std::move(done));
    });
  }
  Result<Order> pay(const std::string& order_id, const std::string& payment_id,
                    int64_t amount_cents) {
    return call_order(*runner, *repo, [&](AgentCore::OrderCallback done) {
      core->pay_async(order_id, payment_id, amount_cents, std::move(done));
    });
  }

  // Provisions a device with the agent and boots its firmware.
  DeviceSim& add_device(const std::string& id, std::vector<SlotSpec> slots,
                        fw::CoreOptions options = test_device_options()) {
    auto provisioned = core->provision_device(id, slots);
    REQUIRE(provisioned.ok());
    auto key = crypto::Key::from_hex(provisioned->key_hex);
    REQUIRE(key.ok());
    std::vector<fw::SlotConfig> configs;
    for (const auto& s : slots) configs.push_back({s.slot, s.capacity, s.product, -1});
    devices.push_back(std::make_unique<DeviceSim>(bus, clock, dir.file(id + ".ledger"), id,
                                                  std::move(key).value(), configs, options));
    devices.back()->boot();
    bus.deliver_all();
    return *devices.back();
  }

  // add_device, then waits until the agent sees it online and, when `count`
  // > 0, restocks `count` tokens into slot 1 and waits for the agent's pool
  // to hold them (a REQUIRE fails the test otherwise).
  DeviceSim& stocked_device(std::vector<SlotSpec> slots, int count, const std::string& id = "vm-1",
                            fw::CoreOptions options = test_device_options()) {
    DeviceSim& dev = add_device(id, std::move(slots), options);
    REQUIRE(online(id));
    if (count > 0) {
      dev.restock(1, count);
      REQUIRE(run_until([&] { return slot(id, 1).pool == count; }));
    }
    return dev;
  }

  // One step of the world.
  void step(int64_t ms = 10) {
    clock.advance(ms);
    for (auto& d : devices) d->tick();
    if (core) {
      core->tick();
      // The writer's commits of this step, and what they post back to the
      // core (acks, answers), land before virtual time moves on.
      repo->flush();
      runner->pump();
    }
    bus.deliver_all();
  }

  void run_for(int64_t ms) {
    for (int64_t t = 0; t < ms; t += 10) step();
  }

  // Steps until `done()` holds; false after `max_ms` of virtual time.
  template <typename Pred>
  bool run_until(Pred done, int64_t max_ms = 20'000) {
    for (int64_t t = 0; t <= max_ms; t += 10) {
      if (done()) return true;
      step();
    }
    return done();
  }

  // The repository, once everything submitted so far is committed.
  Repository& db() {
    repo->flush();
    return *repo;
  }

  Order order(const std::string& id) {
    auto o = core->get_order(id);
    REQUIRE(o.ok());
    return *o;
  }

  OrderState state_of(const std::string& id) { return order(id).state; }

  SlotView slot(const std::string& device, int slot) {
    auto views = core->slots(device);
    REQUIRE(views.ok());
    for (const auto& v : *views) {
      if (v.slot == slot) return v;
    }
    FAIL("no slot " << slot);
    return {};
  }

  // The slot's pool (tokens for sale) as the core sees it.
  int64_t pool(const std::string& device, int slot) { return this->slot(device, slot).pool; }

  // The invariant of one stock truth: every slot's pool in memory is
  // exactly the POOL tokens of the durable log (what a restart rebuilds).
  void check_stock_invariant() {
    repo->flush();
    auto loaded = repo->load(1);
    REQUIRE(loaded.ok());
    std::map<std::pair<std::string, int>, int64_t> durable;
    for (const auto& t : loaded->pool) ++durable[{t.device, t.slot}];
    for (const auto& d : core->devices()) {
      auto views = core->slots(d.id);
      REQUIRE(views.ok());
      for (const auto& v : *views) {
        int64_t logged = durable[std::make_pair(d.id, v.slot)];
        CHECK_MESSAGE(logged == v.pool, d.id << " slot " << v.slot);
      }
    }
  }

  bool online(const std::string& device) {
    for (const auto& d : core->devices()) {
      if (d.id == device) return d.online;
    }
    return false;
  }

  int64_t count_in_state(OrderState state) {
    for (const auto& [name, n] : core->take_metrics().orders_by_state) {
      if (name == to_string(state)) return n;
    }
    return -1;
  }

  vend::test::TempDir dir;
  ManualClock clock;
  InMemoryBus bus;
  SeededRandom random{42};
  MemoryLogger log;
  RepositoryOptions repo_options;
  std::unique_ptr<CallerRunner> runner;   // the core's: its steps run on the test's thread
  std::unique_ptr<RefusableRunner> gate;  // what the core is given: `runner`, unless refusing
  std::unique_ptr<Repository> repo;
  std::unique_ptr<InMemoryClient> client;
  std::unique_ptr<RefusableTransport> transport;  // what the core is given: `client`'s
  std::unique_ptr<AgentCore> core;
  std::vector<std::unique_ptr<DeviceSim>> devices;

 private:
  AgentOptions options_;
};

}  // namespace vend::agent::test
