// InFlightGate (cloud-agent/limits/in_flight_gate.hpp): at most N requests
// per peer in flight, others untouched, memory only for peers in flight.
#include "limits/in_flight_gate.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace vend::agent {
namespace {

TEST_CASE("a peer past its requests in flight is refused; others are not; leaving frees") {
  InFlightGate gate(2);
  CHECK(gate.enter("10.0.0.1"));
  CHECK(gate.enter("10.0.0.1"));
  CHECK_FALSE(gate.enter("10.0.0.1"));
  CHECK(gate.enter("10.0.0.2"));
  CHECK(gate.refused_total() == 1);
  CHECK(gate.in_flight("10.0.0.1") == 2);
  gate.leave("10.0.0.1");
  CHECK(gate.enter("10.0.0.1"));
  gate.leave("10.0.0.1");
  gate.leave("10.0.0.1");
  gate.leave("10.0.0.2");
  CHECK(gate.keys() == 0);  // nothing kept for peers without a request in flight
  CHECK(gate.in_flight("10.0.0.1") == 0);
}

TEST_CASE("0: no limit, nothing kept") {
  InFlightGate gate(0);
  for (int i = 0; i < 1000; ++i) CHECK(gate.enter("10.0.0.1"));
  CHECK(gate.keys() == 0);
  CHECK(gate.refused_total() == 0);
}

TEST_CASE("from many threads at once the bound holds") {
  InFlightGate gate(8);
  std::atomic<int> inside{0}, most{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (!gate.enter("peer")) continue;
        int now = ++inside;
        int seen = most.load();
        while (now > seen && !most.compare_exchange_weak(seen, now)) {
        }
        --inside;
        gate.leave("peer");
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(most.load() <= 8);
  CHECK(most.load() >= 1);
  CHECK(gate.keys() == 0);
}

}  // namespace
}  // namespace vend::agent
