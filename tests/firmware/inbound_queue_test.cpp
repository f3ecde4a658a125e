// InboundQueue: the hand-over from transport threads to the core thread.
#include "shell/inbound_queue.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <thread>

namespace vend::fw {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

TEST_CASE("commands beyond the capacity are dropped and counted") {
  InboundQueue q(3);
  for (int i = 0; i < 5; ++i) CHECK(q.push_command("c" + std::to_string(i)) == (i < 3));
  auto batch = q.take_until(Steady::now());
  CHECK(batch.commands == std::vector<std::string>{"c0", "c1", "c2"});
  CHECK(batch.dropped_since_last == 2);
  CHECK(q.dropped_total() == 2);
  // Room again; the drop is reported once.
  CHECK(q.push_command("c5"));
  batch = q.take_until(Steady::now());
  CHECK(batch.commands == std::vector<std::string>{"c5"});
  CHECK(batch.dropped_since_last == 0);
}

TEST_CASE("a loss is delivered even when the session came back before the consumer looked") {
  InboundQueue q(8);
  q.push_connection(true);
  CHECK(q.take_until(Steady::now()).connection_changes == std::vector<bool>{true});
  q.push_connection(false);
  q.push_connection(true);
  CHECK(q.take_until(Steady::now()).connection_changes == std::vector<bool>{false, true});
  // Repeated states fold into one; nothing new means nothing delivered.
  q.push_connection(false);
  q.push_connection(false);
  CHECK(q.take_until(Steady::now()).connection_changes == std::vector<bool>{false});
  CHECK(q.take_until(Steady::now()).connection_changes.empty());
}

TEST_CASE("take_until wakes as soon as work arrives, else waits for the deadline") {
  InboundQueue q(8);
  auto start = Steady::now();
  auto empty = q.take_until(start + 30ms);
  CHECK(empty.commands.empty());
  CHECK(Steady::now() - start >= 30ms);

  std::thread producer([&] { q.push_command("late"); });
  auto batch = q.take_until(Steady::now() + 10s);
  producer.join();
  CHECK(batch.commands == std::vector<std::string>{"late"});
}

TEST_CASE("many producers lose nothing below the capacity") {
  InboundQueue q(10000);
  std::vector<std::thread> producers;
  producers.reserve(4);
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&q, t] {
      for (int i = 0; i < 1000; ++i) q.push_command(std::to_string(t * 1000 + i));
    });
  }
  for (auto& p : producers) p.join();
  CHECK(q.take_until(Steady::now()).commands.size() == 4000);
  CHECK(q.dropped_total() == 0);
}

}  // namespace
}  // namespace vend::fw
