#include "fleet_scale_sales.hpp"

#include <httplib.h>

#include <chrono>

#include "bench_agent_rig.hpp"
#include "bench_util.hpp"
#include "vend/webhook.hpp"

namespace vend::bench {

Sales::Sales(std::vector<int> ports, std::vector<std::string> machines, int slots,
             std::string gateway_secret, double per_s)
    : ports_(std::move(ports)),
      machines_(std::move(machines)),
      slots_(slots),
      secret_(std::move(gateway_secret)),
      per_s_(per_s) {
  thread_ = std::thread([this] { loop(); });
}

Sales::~Sales() {
  run_ = false;
  thread_.join();
}

Sales::Counts Sales::counts() const { return {paid_.load(), refused_.load(), failed_.load()}; }

// Open loop at per_s_: a slow answer delays the next order, never bunches
// them up (the schedule restarts from now when behind).
void Sales::loop() {
  const int64_t gap_ns = static_cast<int64_t>(1e9 / per_s_);
  int64_t next = now_ns();
  for (uint64_t n = 0; run_; ++n) {
    sell_one(n);
    next += gap_ns;
    int64_t now = now_ns();
    if (next < now) next = now;
    while (run_ && now_ns() < next) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void Sales::sell_one(uint64_t n) {
  // A fixed stride through machines and agents: every machine and every
  // agent gets orders, with no random source to seed.
  const std::string& device = machines_[(n * 7919) % machines_.size()];
  int slot = static_cast<int>(n % static_cast<uint64_t>(slots_)) + 1;
  httplib::Client c("127.0.0.1", ports_[n % ports_.size()]);
  c.set_follow_location(true);
  c.set_connection_timeout(0, 500'000);
  c.set_read_timeout(5, 0);
  auto r =
      c.Post("/v1/orders", R"({"device":")" + device + R"(","slot":)" + std::to_string(slot) + "}",
             "application/json");
  if (!r) {
    ++failed_;
    return;
  }
  if (r->status != 201) {
    ++refused_;
    return;
  }
  std::string order = json_string(r->body, "id");
  SignedPayment p = signed_payment(secret_, order, "pay-" + order, 100);
  auto paid = c.Post("/v1/orders/" + order + "/payment", {{webhook::kHeader, p.signature}}, p.body,
                     "application/json");
  ++(paid && paid->status == 200 ? paid_ : failed_);
}

}  // namespace vend::bench
