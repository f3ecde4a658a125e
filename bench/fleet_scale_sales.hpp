// Steady sales for bench_fleet_scale: customers who order on random
// machines and slots through a random agent of the cluster (following its
// 307 to the machine's owner) and pay each order as the gateway does, at a
// fixed total rate, from one background thread. Non-copyable; stops on
// destruction.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace vend::bench {

class Sales {
 public:
  struct Counts {
    int64_t paid = 0;     // a 200 to the payment
    int64_t refused = 0;  // an answer other than 201 to the order (503 while a shard moves, 409)
    int64_t failed = 0;   // no answer, or the payment not accepted
  };

  // Starts selling at once: `per_s` orders a second over `machines`
  // (8 slots each), through the agents on `ports`.
  Sales(std::vector<int> ports, std::vector<std::string> machines, int slots,
        std::string gateway_secret, double per_s);
  ~Sales();
  Sales(const Sales&) = delete;
  Sales& operator=(const Sales&) = delete;

  Counts counts() const;

 private:
  void loop();
  void sell_one(uint64_t n);

  std::vector<int> ports_;
  std::vector<std::string> machines_;
  int slots_;
  std::string secret_;
  double per_s_;
  std::atomic<bool> run_{true};
  std::atomic<int64_t> paid_{0}, refused_{0}, failed_{0};
  std::thread thread_;
};

}  // namespace vend::bench
