// The people of a live run: customers who order and pay over the agent's HTTP
// API (some abandon, some pay twice), a tracker that follows every order to
// its end, and a restocker who answers low stock with restock orders. Each
// runs on threads of its own until stop(). Counters are atomics, read by the
// progress line and the report at any time.
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "live/cli.hpp"
#include "live/live_http.hpp"

namespace vend::sim {

struct LiveCounters {
  std::atomic<int64_t> orders{0};       // reservations made
  std::atomic<int64_t> refused{0};      // sold out, offline, unknown slot...
  std::atomic<int64_t> http_errors{0};  // the agent did not answer
  std::atomic<int64_t> paid{0};
  std::atomic<int64_t> double_payments{0};
  std::atomic<int64_t> abandoned{0};
  std::atomic<int64_t> completed{0};  // dispensed
  std::atomic<int64_t> expired{0};
  std::atomic<int64_t> refunded{0};
  std::atomic<int64_t> needs_review{0};
  std::atomic<int64_t> in_flight{0};  // tracked, not finished
  std::atomic<int64_t> restocks{0};
  std::atomic<int64_t> retried{0};  // requests sent again (503, no answer; several agents)
};

class LiveWorkload {
 public:
  LiveWorkload(const LiveOptions& options, AgentEndpoint endpoint,
               std::vector<std::string> devices);
  ~LiveWorkload();
  LiveWorkload(const LiveWorkload&) = delete;
  LiveWorkload& operator=(const LiveWorkload&) = delete;

  // Fills every slot once, then starts the restocker and the tracker.
  void start_service();
  void start_customers();
  // Customers stop ordering; the tracker and the restocker go on.
  void stop_customers();
  // Everything stops (joins).
  void stop();

  const LiveCounters& counters() const { return counters_; }
  // Order -> dispense latencies (agent timestamps), ms, of completed orders.
  std::vector<int64_t> latencies() const;
  // The promise as seen over the HTTP API, after stop(): each paid order
  // still not in a final state, and each machine that dispensed more of the
  // sim's orders than it was stocked with (the first fill plus every
  // restock the agent accepted). One line of evidence each.
  std::vector<std::string> unsettled_paid() const;
  std::vector<std::string> oversold() const;

 private:
  struct Tracked {
    std::string id;
    std::string device;
    bool paid = false;
  };
  void customer_loop(int index);
  void one_customer_order(AgentClient& client, uint64_t& rng, int index, int64_t& payment_no);
  void tracker_loop();
  void restocker_loop();
  void restock_pass(AgentClient& client, bool fill);
  void finish(const OrderReply& order, const Tracked& tracked);

  LiveOptions options_;
  AgentEndpoint endpoint_;
  std::vector<std::string> devices_;
  LiveCounters counters_;
  std::atomic<bool> customers_run_{false};
  std::atomic<bool> service_run_{false};
  std::vector<std::thread> customers_;
  std::thread tracker_;
  std::thread restocker_;

  mutable std::mutex mu_;  // guards the fields below
  std::map<std::string, Tracked> tracked_;
  std::vector<int64_t> latencies_;
  std::map<std::string, std::vector<int>> sellable_;  // device -> slots with stock
  std::map<std::string, int64_t> stocked_;            // device -> units filled or restocked
  std::map<std::string, int64_t> dispensed_;          // device -> the sim's completed orders
};

}  // namespace vend::sim
