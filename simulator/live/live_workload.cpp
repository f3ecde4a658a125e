#include "live/live_workload.hpp"

#include <chrono>
#include <cmath>

namespace vend::sim {

namespace {

using std::chrono::milliseconds;

// splitmix64: a per-thread random source (the live run is not deterministic).
uint64_t next(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
double uniform(uint64_t& s) { return (next(s) >> 11) * (1.0 / 9007199254740992.0); }

// Sleeps up to `ms` in small pieces while `run` holds.
void nap(const std::atomic<bool>& run, int64_t ms) {
  auto until = std::chrono::steady_clock::now() + milliseconds(ms);
  while (run && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(std::min<int64_t>(ms, 50)));
  }
}

bool is_final(const std::string& state) {
  return state == "COMPLETED" || state == "REFUNDED" || state == "NEEDS_REVIEW" ||
         state == "EXPIRED" || state == "CANCELLED";
}

}  // namespace

LiveWorkload::LiveWorkload(const LiveOptions& options, AgentEndpoint endpoint,
                           std::vector<std::string> devices)
    : options_(options), endpoint_(std::move(endpoint)), devices_(std::move(devices)) {}

LiveWorkload::~LiveWorkload() { stop(); }

void LiveWorkload::start_service() {
  AgentClient client(endpoint_, "sim-restocker", &counters_.retried);
  restock_pass(client, true);
  service_run_ = true;
  tracker_ = std::thread([this] { tracker_loop(); });
  restocker_ = std::thread([this] { restocker_loop(); });
}

void LiveWorkload::start_customers() {
  customers_run_ = true;
  for (int i = 0; i < options_.customers; ++i) {
    customers_.emplace_back([this, i] { customer_loop(i); });
  }
}

void LiveWorkload::stop_customers() {
  customers_run_ = false;
  for (auto& t : customers_) t.join();
  customers_.clear();
}

void LiveWorkload::stop() {
  stop_customers();
  service_run_ = false;
  if (tracker_.joinable()) tracker_.join();
  if (restocker_.joinable()) restocker_.join();
}

std::vector<int64_t> LiveWorkload::latencies() const {
  std::lock_guard lock(mu_);
  return latencies_;
}

void LiveWorkload::customer_loop(int index) {
  AgentClient client(endpoint_, "sim-customer-" + std::to_string(index), &counters_.retried);
  uint64_t rng = options_.seed * 1000003 + static_cast<uint64_t>(index) + 1;
  int64_t payment_no = 0;
  double mean_ms = 1000.0 * options_.customers / options_.rate;
  while (customers_run_) {
    nap(customers_run_, static_cast<int64_t>(-std::log(1.0 - uniform(rng)) * mean_ms));
    if (customers_run_) one_customer_order(client, rng, index, payment_no);
  }
}

void LiveWorkload::one_customer_order(AgentClient& client, uint64_t& rng, int index,
                                      int64_t& payment_no) {
  std::string device;
  int slot = 0;
  {
    std::lock_guard lock(mu_);
    if (sellable_.empty()) return;
    auto it = std::next(sellable_.begin(), next(rng) % sellable_.size());
    device = it->first;
    slot = it->second[next(rng) % it->second.size()];
  }
  auto order = client.create_order(device, slot);
  if (!order.ok()) {
    ++(order.error().code == "http_error" ? counters_.http_errors : counters_.refused);
    return;
  }
  ++counters_.orders;
  ++counters_.in_flight;
  bool paid = false;
  if (uniform(rng) < options_.abandon) {
    ++counters_.abandoned;
  } else {
    std::string base = "c" + std::to_string(index) + "-" + std::to_string(++payment_no);
    auto p =
        client.pay(order->id, "pay-" + order->id.substr(0, 24) + "-" + base, order->price_cents);
    paid = p.ok();
    if (paid) ++counters_.paid;
    if (!p.ok() && p.error().code == "http_error") ++counters_.http_errors;
    if (paid && uniform(rng) < options_.pay_twice) {
      (void)client.pay(order->id, "pay2-" + order->id.substr(0, 24) + "-" + base,
                       order->price_cents);
      ++counters_.double_payments;
    }
  }
  std::lock_guard lock(mu_);
  tracked_[order->id] = Tracked{order->id, device, paid};
}

void LiveWorkload::finish(const OrderReply& order, const Tracked& tracked) {
  --counters_.in_flight;
  if (order.state == "COMPLETED") {
    ++counters_.completed;
    std::lock_guard lock(mu_);
    latencies_.push_back(order.updated_ms - order.created_ms);
    ++dispensed_[tracked.device];
  } else if (order.state == "EXPIRED") {
    ++counters_.expired;
  } else if (order.state == "REFUNDED") {
    ++counters_.refunded;
  } else if (order.state == "NEEDS_REVIEW") {
    ++counters_.needs_review;
  }
}

std::vector<std::string> LiveWorkload::unsettled_paid() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [id, t] : tracked_) {
    if (t.paid) out.push_back("paid order " + id + " on " + t.device + " never settled");
  }
  return out;
}

std::vector<std::string> LiveWorkload::oversold() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  for (const auto& [device, n] : dispensed_) {
    auto it = stocked_.find(device);
    int64_t stocked = it == stocked_.end() ? 0 : it->second;
    if (n > stocked) {
      out.push_back(device + " dispensed " + std::to_string(n) + " orders, stocked with " +
                    std::to_string(stocked));
    }
  }
  return out;
}

void LiveWorkload::tracker_loop() {
  AgentClient client(endpoint_, "sim-tracker", &counters_.retried);
  while (service_run_) {
    std::vector<Tracked> open;
    {
      std::lock_guard lock(mu_);
      for (const auto& [id, t] : tracked_) open.push_back(t);
    }
    for (const Tracked& t : open) {
      if (!service_run_) return;
      auto order = client.get_order(t.id);
      if (!order.ok() || !is_final(order->state)) continue;
      finish(*order, t);
      std::lock_guard lock(mu_);
      tracked_.erase(t.id);
    }
    nap(service_run_, 200);
  }
}

void LiveWorkload::restocker_loop() {
  AgentClient client(endpoint_, "sim-restocker", &counters_.retried);
  while (service_run_) {
    nap(service_run_, 2000);
    if (service_run_) restock_pass(client, false);
  }
}

// Low stock (under half the capacity, counting what is held by orders) gets a
// restock order for the difference; `fill` restocks everything not full.
void LiveWorkload::restock_pass(AgentClient& client, bool fill) {
  std::map<std::string, std::vector<int>> sellable;
  std::map<std::string, int64_t> stocked;  // this pass's additions
  for (const std::string& device : devices_) {
    if (!fill && !service_run_) break;  // keep what this pass stocked
    auto slots = client.slots(device);
    if (!slots.ok()) continue;
    for (const SlotReply& s : *slots) {
      int64_t have = s.pool + s.reserved + s.dispatched;
      if (fill) stocked[device] += have;  // what the machine held before the sim
      if (s.pool > 0) sellable[device].push_back(s.slot);
      bool low = fill ? have < s.capacity : have * 2 < s.capacity;
      if (low && client.restock(device, s.slot, static_cast<int>(s.capacity - have)).ok()) {
        ++counters_.restocks;
        stocked[device] += s.capacity - have;
      }
    }
  }
  std::lock_guard lock(mu_);
  sellable_ = std::move(sellable);
  for (const auto& [device, n] : stocked) stocked_[device] += n;
}

}  // namespace vend::sim
