// Inbox: the hand-over from other threads to a single-threaded core.
#include "vend/inbox.hpp"

#include <doctest/doctest.h>
#include <pthread.h>

#include <chrono>
#include <string>
#include <thread>

#include "vend/thread_name.hpp"

namespace vend {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;
using StringInbox = Inbox<std::string>;

std::vector<std::string> messages_of(const StringInbox::Batch& b) {
  std::vector<std::string> out;
  for (const auto& item : b.items) {
    if (item.index() == 0) out.push_back(std::get<0>(item));
  }
  return out;
}

TEST_CASE("messages beyond the count bound are dropped and counted, reported once") {
  StringInbox q({3, 1 << 20, 8});
  for (int i = 0; i < 5; ++i) CHECK(q.push_message("c" + std::to_string(i), 2) == (i < 3));
  auto batch = q.take_until(Steady::now());
  CHECK(messages_of(batch) == std::vector<std::string>{"c0", "c1", "c2"});
  CHECK(batch.dropped_since_last == 2);
  CHECK(q.dropped_total() == 2);
  CHECK(q.push_message("c5", 2));
  batch = q.take_until(Steady::now());
  CHECK(messages_of(batch) == std::vector<std::string>{"c5"});
  CHECK(batch.dropped_since_last == 0);
}

TEST_CASE("messages beyond the byte bound are dropped; the fill says what waits") {
  StringInbox q({100, 10, 8});
  CHECK(q.push_message("aaaaaa", 6));
  CHECK_FALSE(q.push_message("bbbbbb", 6));  // 12 > 10
  CHECK(q.push_message("cccc", 4));          // exactly 10
  auto fill = q.fill();
  CHECK(fill.messages == 2);
  CHECK(fill.bytes == 10);
  CHECK(fill.max_bytes == 10);
  (void)q.take_until(Steady::now());
  CHECK(q.fill().bytes == 0);
}

TEST_CASE("calls beyond their bound are refused, never dropped silently; order is kept") {
  StringInbox q({8, 1 << 20, 2});
  std::vector<std::string> ran;
  CHECK(q.push_call([&] { ran.push_back("call-1"); }));
  CHECK(q.push_message("msg", 3));
  CHECK(q.push_call([&] { ran.push_back("call-2"); }));
  CHECK_FALSE(q.push_call([&] { ran.push_back("call-3"); }));  // refused: the caller answers 503
  auto batch = q.take_until(Steady::now());
  REQUIRE(batch.items.size() == 3);
  for (auto& item : batch.items) {
    if (item.index() == 1) {
      std::get<1>(item)();
    } else {
      ran.push_back(std::get<0>(item));
    }
  }
  CHECK(ran == std::vector<std::string>{"call-1", "msg", "call-2"});
  CHECK(batch.dropped_since_last == 0);  // refused calls are not message drops
}

TEST_CASE("a loss is delivered even when the session came back before the consumer looked") {
  StringInbox q({8, 1 << 20, 8});
  q.push_connection(true);
  CHECK(q.take_until(Steady::now()).connection_changes == std::vector<bool>{true});
  q.push_connection(false);
  q.push_connection(true);
  CHECK(q.take_until(Steady::now()).connection_changes == std::vector<bool>{false, true});
  q.push_connection(false);
  q.push_connection(false);
  CHECK(q.take_until(Steady::now()).connection_changes == std::vector<bool>{false});
  CHECK(q.take_until(Steady::now()).connection_changes.empty());
}

TEST_CASE("take_until wakes as soon as work arrives, else waits for the deadline") {
  StringInbox q({8, 1 << 20, 8});
  auto start = Steady::now();
  auto empty = q.take_until(start + 30ms);
  CHECK(empty.items.empty());
  CHECK(Steady::now() - start >= 30ms);

  std::thread producer([&] { q.push_message("late", 4); });
  auto batch = q.take_until(Steady::now() + 10s);
  producer.join();
  CHECK(messages_of(batch) == std::vector<std::string>{"late"});
}

TEST_CASE("close: later pushes fail, what was queued is still delivered, the consumer wakes") {
  StringInbox q({8, 1 << 20, 8});
  CHECK(q.push_message("before", 6));
  q.close();
  CHECK_FALSE(q.push_message("after", 5));
  CHECK_FALSE(q.push_call([] {}));
  CHECK(q.dropped_total() == 0);  // refused after close, not a drop
  auto start = Steady::now();
  auto batch = q.take_until(Steady::now() + 10s);
  CHECK(Steady::now() - start < 5s);
  CHECK(batch.closed);
  CHECK(messages_of(batch) == std::vector<std::string>{"before"});
}

TEST_CASE("many producers lose nothing below the bounds") {
  StringInbox q({10000, 1 << 20, 10000});
  std::vector<std::thread> producers;
  producers.reserve(4);
  for (int t = 0; t < 4; ++t) {
    producers.emplace_back([&q, t] {
      for (int i = 0; i < 1000; ++i) q.push_message(std::to_string(t * 1000 + i), 4);
    });
  }
  for (auto& p : producers) p.join();
  CHECK(q.take_until(Steady::now()).items.size() == 4000);
  CHECK(q.dropped_total() == 0);
}

TEST_CASE("one source cannot fill the queue: past its share its messages are dropped") {
  StringInbox::Limits limits{100, 1 << 20, 8};
  limits.max_messages_per_source = 3;
  StringInbox q(limits);
  for (int i = 0; i < 50; ++i)
    CHECK(q.push_message("flood-" + std::to_string(i), 8, "vm-bad") == (i < 3));
  // The others still get in, each up to its own share; no source: no share.
  CHECK(q.push_message("a-1", 3, "vm-a"));
  CHECK(q.push_message("b-1", 3, "vm-b"));
  for (int i = 0; i < 10; ++i) CHECK(q.push_message("plain", 5));
  CHECK(q.dropped_total() == 47);
  CHECK(q.dropped_over_share_total() == 47);
  auto batch = q.take_until(Steady::now());
  CHECK(messages_of(batch).size() == 15);
  CHECK(batch.dropped_since_last == 47);
  // Once taken, each source has its whole share again.
  for (int i = 0; i < 3; ++i) CHECK(q.push_message("again", 5, "vm-bad"));
  CHECK_FALSE(q.push_message("again", 5, "vm-bad"));
  CHECK(q.dropped_over_share_total() == 48);
}

TEST_CASE("the overall bounds still apply below every source's share") {
  StringInbox::Limits limits{4, 1 << 20, 8};
  limits.max_messages_per_source = 3;
  StringInbox q(limits);
  CHECK(q.push_message("a", 1, "vm-a"));
  CHECK(q.push_message("b", 1, "vm-b"));
  CHECK(q.push_message("c", 1, "vm-c"));
  CHECK(q.push_message("d", 1, "vm-d"));
  CHECK_FALSE(q.push_message("e", 1, "vm-e"));  // the queue is full
  CHECK(q.dropped_total() == 1);
  CHECK(q.dropped_over_share_total() == 0);
}

}  // namespace
}  // namespace vend

TEST_CASE("name_this_thread: the name ps and perf show, cut to Linux's 15 characters") {
  std::string named, cut;
  std::thread([&] {
    vend::name_this_thread("vend-core");
    char buf[32] = {};
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    named = buf;
    vend::name_this_thread("a-name-longer-than-fifteen");
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    cut = buf;
  }).join();
  CHECK(named == "vend-core");
  CHECK(cut == "a-name-longer-t");
}
