// Repository::after_durable: a callback runs once its write's group is
// durable, and never waits for a later group.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <memory>

#include "test_support.hpp"
#include "repository/repository.hpp"
#include "vend/log.hpp"
#include "write_gate.hpp"

using namespace vend;
using namespace vend::agent;
using namespace std::chrono_literals;

// The marker after_durable() queues lands behind writes that arrive while its
// own write is being committed; it used to wait for their group's commit
// (and fsync) too.
TEST_CASE("after_durable: the callback does not wait for the next group's commit") {
  vend::test::TempDir dir;
  MemoryLogger log;
  auto opened = Repository::open(dir.file("agent.db"), RepositoryOptions{}, log);
  REQUIRE(opened.ok());
  std::unique_ptr<Repository> repo = std::move(opened).value();
  vend::test::WriteGate first, second;
  auto t1 = repo->submit(first.write());
  REQUIRE(t1.ok());
  first.wait_started();  // t1's group is being applied
  auto called = std::make_shared<std::promise<Status>>();
  std::future<Status> callback = called->get_future();
  repo->after_durable(*t1, [called](Status s) { called->set_value(std::move(s)); });
  auto t2 = repo->submit(second.write());  // queued behind the marker
  REQUIRE(t2.ok());
  first.open();
  second.wait_started();  // the writer is inside t2's group, not committed yet
  CHECK(callback.wait_for(2s) == std::future_status::ready);
  second.open();
  CHECK(t2->get().ok());
  REQUIRE(callback.wait_for(5s) == std::future_status::ready);
  CHECK(callback.get().ok());
}
