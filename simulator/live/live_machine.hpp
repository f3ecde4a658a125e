// One machine of the live fleet: the real firmware core with the simulated
// HAL, its own ledger file, and its own Paho client to the broker.
//
// Threads: Paho hands commands and connection changes over through one
// bounded queue (the firmware daemon's pattern); everything else — the core,
// the ledger, faults — runs on the owner thread that calls step().
// connect_blocking() may run on any thread (start-up connects the fleet in
// parallel); reconnects after a fault run on a helper thread of their own.
// Non-copyable.
#pragma once

#include <atomic>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sim_hal/sim_hal.hpp"
#include "vend/crypto.hpp"
#include "vend/fw/device_core.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/paho_transport.hpp"

namespace vend::sim {

struct LiveMachineSetup {
  std::string id;
  crypto::Key key;
  std::string ledger_path;
  std::string broker_url;
  std::vector<fw::SlotConfig> slots;
  fw::CoreOptions core;
  fw::SimulatedMachineOptions mechanics;
  double duplicate = 0;  // per command received and per event sent
  uint64_t seed = 1;
  // TCP_NODELAY on each (re)connect. The transport finds its socket by
  // scanning the process's descriptors: a process hosting thousands of
  // machines turns it off and calls enable_tcp_nodelay_to_peer() once.
  bool tcp_nodelay = true;
  std::optional<std::string> mqtt_password = std::nullopt;  // set: log in as `id` with it
  std::string mqtt_ca_file = {};                            // ssl:// brokers
};

class LiveMachine {
 public:
  LiveMachine(LiveMachineSetup setup, Logger& log);
  ~LiveMachine();
  LiveMachine(const LiveMachine&) = delete;
  LiveMachine& operator=(const LiveMachine&) = delete;

  // Opens the ledger and starts the core (no network yet). Owner thread.
  Status boot();
  // An operator at the machine loads `count` items into `slot` and confirms
  // restock `restock_id` (as `vend-firmware restock` does): the ledger mints
  // the tokens and the core sends the `tokens` event with its next outbox
  // scan. Owner thread, after boot(); refused when the slot has no room.
  Status load_restock(const std::string& restock_id, int slot, int count);
  // The first connection; blocks up to the Paho connect timeout.
  Status connect_blocking();
  // Owner thread: hands queued commands to the core, ticks it, finishes a
  // reconnect or a reboot that is due.
  void step();

  // Faults, owner thread. The connection drops for `ms` (offline published,
  // as the will would be), then comes back.
  void go_offline(int64_t ms);
  // kill -9: the core and the connection vanish mid-work (Paho can only
  // disconnect cleanly in-process, so no will); reboots after `ms`.
  void crash(int64_t ms);
  // Clean stop: offline published, session closed.
  void stop();

  const std::string& id() const { return setup_.id; }
  bool online() const { return online_; }
  bool faulted() const { return fault_until_ms_ != 0; }
  // Events not yet acknowledged, as of the last step().
  int64_t outbox_depth() const { return outbox_depth_; }

 private:
  using Inbound = std::variant<std::string, bool>;  // payload, or connection change
  void make_transport();
  void enqueue(const Inbound& item);
  void heal_fault();

  LiveMachineSetup setup_;
  Logger& log_;
  SystemClock clock_;
  SeededRandom random_;
  fw::SimulatedMachine mechanics_;
  std::optional<fw::Ledger> ledger_;
  std::unique_ptr<PahoTransport> paho_;
  std::unique_ptr<Transport> transport_;  // paho_ behind the duplicating decorator
  std::unique_ptr<fw::DeviceCore> core_;
  std::future<Status> reconnect_;

  std::mutex mu_;  // guards inbound_ and dup_random_
  std::deque<Inbound> inbound_;
  SeededRandom dup_random_;
  int64_t dropped_ = 0;

  std::atomic<bool> online_{false};
  std::atomic<int64_t> outbox_depth_{0};
  int64_t fault_until_ms_ = 0;  // monotonic; 0 = no fault
  bool crashed_ = false;
  int64_t last_depth_ms_ = 0;
};

}  // namespace vend::sim
