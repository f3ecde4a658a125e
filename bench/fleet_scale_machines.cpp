#include "fleet_scale_machines.hpp"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "fleet_scale_seed.hpp"
#include "live/live_machine.hpp"
#include "vend/crypto.hpp"
#include "vend/paho_transport.hpp"

namespace vend::bench {

ScaleFleet::ScaleFleet(ScaleFleetSpec spec, Logger& log) : spec_(std::move(spec)), log_(log) {}

ScaleFleet::~ScaleFleet() {
  run_ = false;
  for (auto& t : steppers_) t.join();
  // In parallel: a stop publishes the offline presence and waits for the
  // disconnect.
  (void)for_each_machine([this](size_t i) {
    machines_[i]->stop();
    return Status{};
  });
  machines_.clear();
}

Status ScaleFleet::for_each_machine(const std::function<Status(size_t)>& fn) {
  std::atomic<size_t> next{0};
  std::mutex mu;
  Status first_error;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, spec_.setup_threads); ++t) {
    pool.emplace_back([&] {
      for (size_t i = next++; i < machines_.size(); i = next++) {
        Status s = fn(i);
        if (s.ok()) continue;
        std::lock_guard lock(mu);
        if (first_error.ok()) {
          first_error = make_error(s.error().code, ids_[i] + ": " + s.error().message);
        }
        next = machines_.size();
      }
    });
  }
  for (auto& t : pool) t.join();
  return first_error;
}

Status ScaleFleet::boot_one(size_t i) {
  sim::LiveMachine& m = *machines_[i];
  if (Status s = m.boot(); !s.ok()) return s;
  for (int slot = 1; slot <= spec_.slots; ++slot) {
    if (Status s = m.load_restock("boot-" + std::to_string(slot), slot, spec_.loaded_per_slot);
        !s.ok()) {
      return s;
    }
  }
  return m.connect_blocking();
}

Status ScaleFleet::start() {
  std::vector<fw::SlotConfig> slots;
  for (int s = 1; s <= spec_.slots; ++s) {
    slots.push_back({s, spec_.capacity, "product-" + std::to_string(s), -1});
  }
  for (int i = spec_.first; i < spec_.first + spec_.machines; ++i) {
    std::string id = scale_machine_id(spec_.prefix, i);
    auto key = crypto::Key::from_hex(scale_machine_key_hex(id));
    if (!key.ok()) return key.error();
    sim::LiveMachineSetup setup{id,
                                *key,
                                spec_.ledger_dir + "/" + id + ".ledger.db",
                                spec_.broker_url,
                                slots,
                                fw::CoreOptions{},
                                fw::SimulatedMachineOptions{0, 0.0},
                                0.0,
                                static_cast<uint64_t>(i) * 7919 + 1};
    setup.tcp_nodelay = false;  // set once for all below: a scan per connect is quadratic
    machines_.push_back(std::make_unique<sim::LiveMachine>(std::move(setup), log_));
    ids_.push_back(id);
  }
  if (Status s = for_each_machine([this](size_t i) { return boot_one(i); }); !s.ok()) return s;
  size_t colon = spec_.broker_url.rfind(':');
  auto nodelay =
      enable_tcp_nodelay_to_peer("127.0.0.1", std::atoi(spec_.broker_url.c_str() + colon + 1));
  if (!nodelay.ok()) return nodelay.error();
  run_ = true;
  size_t threads =
      std::min<size_t>(static_cast<size_t>(std::max(1, spec_.step_threads)), machines_.size());
  for (size_t t = 0; t < threads; ++t) {
    steppers_.emplace_back([this, t, threads] { step_loop(t, threads); });
  }
  return {};
}

void ScaleFleet::step_loop(size_t first, size_t stride) {
  while (run_) {
    for (size_t i = first; i < machines_.size() && run_; i += stride) machines_[i]->step();
    std::this_thread::sleep_for(std::chrono::microseconds(spec_.tick_us));
  }
}

int ScaleFleet::online() const {
  int n = 0;
  for (const auto& m : machines_) n += m->online() ? 1 : 0;
  return n;
}

int64_t ScaleFleet::unacked_events() const {
  int64_t n = 0;
  for (const auto& m : machines_) n += std::max<int64_t>(0, m->outbox_depth());
  return n;
}

}  // namespace vend::bench
