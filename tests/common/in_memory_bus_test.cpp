#include "vend/in_memory_bus.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace vend {
namespace {

// Records what one client sees.
struct Seen {
  std::vector<Message> messages;
  std::vector<bool> connection;

  void attach(Transport& client) {
    client.on_message([this](const Message& m) { messages.push_back(m); });
    client.on_connection([this](bool up) { connection.push_back(up); });
  }
  std::vector<std::string> payloads() const {
    std::vector<std::string> out;
    for (const Message& m : messages) out.push_back(m.payload);
    return out;
  }
};

Message msg(std::string topic, std::string payload, int qos = 1, bool retained = false) {
  return Message{std::move(topic), std::move(payload), qos, retained};
}

// A connected subscriber and a connected publisher on one bus.
struct Pair {
  InMemoryBus bus;
  std::unique_ptr<InMemoryClient> sub = bus.make_client("sub");
  std::unique_ptr<InMemoryClient> pub = bus.make_client("pub");
  Seen seen;

  explicit Pair(const std::string& filter = "t/#") {
    seen.attach(*sub);
    REQUIRE(sub->connect());
    REQUIRE(pub->connect());
    REQUIRE(sub->subscribe(filter));
  }
  void publish_n(int n, const std::string& topic = "t/x") {
    for (int i = 0; i < n; ++i) REQUIRE(pub->publish(msg(topic, std::to_string(i))));
  }
};

TEST_CASE("topic filter matching follows MQTT 3.1.1") {
  struct Row {
    const char* filter;
    const char* topic;
    bool match;
  };
  const Row rows[] = {
      {"a/b", "a/b", true},
      {"a/b", "a/c", false},
      {"a/+", "a/b", true},
      {"a/+", "a/b/c", false},
      {"a/+", "a", false},
      {"+/b", "a/b", true},
      {"+", "a", true},
      {"+", "/a", false},
      {"+/+", "/a", true},
      {"a/#", "a", true},
      {"a/#", "a/b/c", true},
      {"#", "a/b", true},
      {"#", "$SYS/x", false},
      {"+/x", "$SYS/x", false},
      {"$SYS/#", "$SYS/x", true},
      {"a/+/c", "a/b/c", true},
      {"a/+/c", "a/b/d", false},
      {"a//c", "a//c", true},
      {"a/+/c", "a//c", true},
      {"vend/v1/dev/+/evt", "vend/v1/dev/m1/evt", true},
      {"vend/v1/dev/+/evt", "vend/v1/dev/m1/cmd", false},
  };
  for (const Row& row : rows) {
    CAPTURE(row.filter);
    CAPTURE(row.topic);
    CHECK(InMemoryBus::topic_matches(row.filter, row.topic) == row.match);
  }
}

TEST_CASE("topic name and filter validation") {
  CHECK(InMemoryBus::is_valid_topic_filter("a/+/#"));
  CHECK(InMemoryBus::is_valid_topic_filter("#"));
  CHECK_FALSE(InMemoryBus::is_valid_topic_filter(""));
  CHECK_FALSE(InMemoryBus::is_valid_topic_filter("a/#/b"));
  CHECK_FALSE(InMemoryBus::is_valid_topic_filter("a/b#"));
  CHECK_FALSE(InMemoryBus::is_valid_topic_filter("a+/b"));
  CHECK(InMemoryBus::is_valid_topic_name("a/b"));
  CHECK_FALSE(InMemoryBus::is_valid_topic_name("a/+"));
  CHECK_FALSE(InMemoryBus::is_valid_topic_name(""));

  InMemoryBus bus;
  auto c = bus.make_client("c");
  REQUIRE(c->connect());
  CHECK(c->subscribe("a/#/b").error().code == "bad_topic_filter");
  CHECK(c->publish(msg("a/#", "x")).error().code == "bad_topic");
  CHECK(c->publish(msg("a", "x", 3)).error().code == "bad_qos");
}

TEST_CASE("delivery waits for deliver_one and keeps order") {
  Pair p;
  p.publish_n(3);
  CHECK(p.bus.pending() == 3);
  CHECK(p.seen.messages.empty());
  CHECK(p.bus.deliver_one());
  CHECK(p.seen.payloads() == std::vector<std::string>{"0"});
  CHECK(p.bus.deliver_all() == 2);
  CHECK(p.seen.payloads() == std::vector<std::string>{"0", "1", "2"});
  CHECK_FALSE(p.bus.deliver_one());
  CHECK(p.bus.delivered_count() == 3);
}

TEST_CASE("one copy per client at the highest matching qos") {
  Pair p("t/#");
  REQUIRE(p.sub->subscribe("t/+", 0));
  REQUIRE(p.pub->publish(msg("t/x", "a", 1)));
  p.bus.deliver_all();
  REQUIRE(p.seen.messages.size() == 1);
  CHECK(p.seen.messages[0].qos == 1);
}

TEST_CASE("exact and wildcard filters: fan-out in client id order, unsubscribe and takeover") {
  InMemoryBus bus;
  auto pub = bus.make_client("pub");
  REQUIRE(pub->connect());
  std::vector<std::string> order;
  std::vector<std::unique_ptr<InMemoryClient>> subs;
  for (std::string id : {"c", "a", "b"}) {
    subs.push_back(bus.make_client(id));
    subs.back()->on_message(
        [&order, id](const Message& m) { order.push_back(id + ":" + m.payload); });
    REQUIRE(subs.back()->connect());
  }
  REQUIRE(subs[0]->subscribe("t/x"));     // c: exact
  REQUIRE(subs[1]->subscribe("t/+", 0));  // a: wildcard
  REQUIRE(subs[1]->subscribe("t/x", 1));  //    and exact: one copy, QoS 1
  REQUIRE(subs[2]->subscribe("t/y"));     // b: another topic
  REQUIRE(pub->publish(msg("t/x", "1")));
  bus.deliver_all();
  CHECK(order == std::vector<std::string>{"a:1", "c:1"});
  REQUIRE(subs[1]->unsubscribe("t/+"));  // a keeps its exact filter
  REQUIRE(subs[0]->unsubscribe("t/x"));  // c has none left
  REQUIRE(pub->publish(msg("t/x", "2")));
  bus.deliver_all();
  CHECK(order == std::vector<std::string>{"a:1", "c:1", "a:2"});
  // A clean session taking a's id over drops every filter of a's session.
  auto clean = bus.make_client("a", std::nullopt, /*clean_session=*/true);
  REQUIRE(clean->connect());
  REQUIRE(pub->publish(msg("t/x", "3")));
  REQUIRE(pub->publish(msg("t/y", "4")));
  bus.deliver_all();
  CHECK(order == std::vector<std::string>{"a:1", "c:1", "a:2", "b:4"});
}

TEST_CASE("publish while disconnected fails with not_connected") {
  InMemoryBus bus;
  auto c = bus.make_client("c");
  CHECK(c->publish(msg("a", "x")).error().code == "not_connected");
  REQUIRE(c->connect());
  c->disconnect();
  CHECK_FALSE(c->connected());
  CHECK(c->publish(msg("a", "x")).error().code == "not_connected");
}

TEST_CASE("retained messages reach new subscribers; an empty payload clears them") {
  InMemoryBus bus;
  auto pub = bus.make_client("pub");
  REQUIRE(pub->connect());
  REQUIRE(pub->publish(msg("s/m1", "online", 1, true)));
  bus.deliver_all();
  REQUIRE(bus.retained("s/m1"));

  auto sub = bus.make_client("sub");
  Seen seen;
  seen.attach(*sub);
  REQUIRE(sub->connect());
  REQUIRE(sub->subscribe("s/+"));
  bus.deliver_all();
  REQUIRE(seen.messages.size() == 1);
  CHECK(seen.messages[0].payload == "online");
  CHECK(seen.messages[0].retained);

  REQUIRE(pub->publish(msg("s/m1", "", 1, true)));
  bus.deliver_all();
  CHECK_FALSE(bus.retained("s/m1"));
  REQUIRE(seen.messages.size() == 2);
  CHECK_FALSE(seen.messages[1].retained);  // live copy

  auto late = bus.make_client("late");
  Seen late_seen;
  late_seen.attach(*late);
  REQUIRE(late->connect());
  REQUIRE(late->subscribe("s/#"));
  bus.deliver_all();
  CHECK(late_seen.messages.empty());
}

TEST_CASE("persistent session: qos1 queued while offline, delivered after reconnect") {
  Pair p;
  p.sub->disconnect();
  p.publish_n(2);
  REQUIRE(p.pub->publish(msg("t/x", "qos0 lost", 0)));
  p.bus.deliver_all();
  CHECK(p.seen.messages.empty());
  CHECK(p.bus.stats().dropped_offline == 1);

  // A new process with the same id resumes the session: no subscribe needed.
  p.sub.reset();
  auto again = p.bus.make_client("sub");
  Seen seen;
  seen.attach(*again);
  REQUIRE(again->connect());
  CHECK(again->last_session_present());
  p.bus.deliver_all();
  CHECK(seen.payloads() == std::vector<std::string>{"0", "1"});
}

TEST_CASE("clean session forgets subscriptions and queued messages") {
  InMemoryBus bus;
  auto sub = bus.make_client("sub", std::nullopt, /*clean_session=*/true);
  auto pub = bus.make_client("pub");
  Seen seen;
  seen.attach(*sub);
  REQUIRE(sub->connect());
  REQUIRE(pub->connect());
  REQUIRE(sub->subscribe("t"));
  sub->disconnect();
  REQUIRE(pub->publish(msg("t", "while offline")));
  REQUIRE(sub->connect());
  CHECK_FALSE(sub->last_session_present());
  REQUIRE(pub->publish(msg("t", "after")));
  bus.deliver_all();
  // The client re-applied its remembered subscription, the broker kept nothing.
  CHECK(seen.payloads() == std::vector<std::string>{"after"});
}

TEST_CASE("messages pending for a client that goes offline are queued for its session") {
  Pair p;
  p.publish_n(2);
  p.bus.disconnect("sub", /*publish_will=*/false);
  p.bus.deliver_all();
  CHECK(p.seen.messages.empty());
  REQUIRE(p.bus.reconnect("sub"));
  p.bus.deliver_all();
  CHECK(p.seen.payloads() == std::vector<std::string>{"0", "1"});
  CHECK(p.seen.connection == std::vector<bool>{true, false, true});
}

TEST_CASE("last will: published on kill, not on clean disconnect") {
  InMemoryBus bus;
  auto watcher = bus.make_client("watcher");
  Seen seen;
  seen.attach(*watcher);
  REQUIRE(watcher->connect());
  REQUIRE(watcher->subscribe("status/+"));

  Will will{"status/dev", "offline", 1, true};
  auto dev = bus.make_client("dev", will);
  Seen dev_seen;
  dev_seen.attach(*dev);
  REQUIRE(dev->connect());
  dev->disconnect();
  bus.deliver_all();
  CHECK(seen.messages.empty());
  CHECK(bus.stats().wills_published == 0);

  REQUIRE(dev->connect());
  bus.kill_client("dev");
  bus.deliver_all();
  REQUIRE(seen.messages.size() == 1);
  CHECK(seen.messages[0].topic == "status/dev");
  CHECK(seen.messages[0].payload == "offline");
  CHECK(bus.retained("status/dev")->payload == "offline");
  CHECK(dev_seen.connection == std::vector<bool>{true, true});  // a dead client is not told
  CHECK_FALSE(dev->connected());
}

TEST_CASE("disconnect(id) is a lost connection: handler told, will published") {
  InMemoryBus bus;
  auto watcher = bus.make_client("watcher");
  Seen seen;
  seen.attach(*watcher);
  REQUIRE(watcher->connect());
  REQUIRE(watcher->subscribe("status/+"));
  auto dev = bus.make_client("dev", Will{"status/dev", "offline", 1, false});
  Seen dev_seen;
  dev_seen.attach(*dev);
  REQUIRE(dev->connect());

  bus.disconnect("dev");
  CHECK(dev_seen.connection == std::vector<bool>{true, false});
  CHECK(dev->publish(msg("a", "x")).error().code == "not_connected");
  bus.deliver_all();
  CHECK(seen.payloads() == std::vector<std::string>{"offline"});
  CHECK(bus.reconnect("dev"));
  CHECK(dev->connected());
  CHECK_FALSE(bus.reconnect("dev"));  // already connected
}

TEST_CASE("fault filter: drop") {
  Pair p;
  p.bus.set_filter([](const InMemoryBus::Envelope& e) {
    return e.message.payload == "1" ? InMemoryBus::Fault::drop() : InMemoryBus::Fault::deliver();
  });
  p.publish_n(3);
  p.bus.deliver_all();
  CHECK(p.seen.payloads() == std::vector<std::string>{"0", "2"});
  CHECK(p.bus.stats().dropped_filter == 1);
}

TEST_CASE("fault filter: duplicate delivers now and once more later, filtered once") {
  Pair p;
  int asked = 0;
  p.bus.set_filter([&](const InMemoryBus::Envelope& e) {
    ++asked;
    return e.message.payload == "0" ? InMemoryBus::Fault::duplicate()
                                    : InMemoryBus::Fault::deliver();
  });
  p.publish_n(2);
  p.bus.deliver_all();
  CHECK(p.seen.payloads() == std::vector<std::string>{"0", "1", "0"});
  CHECK(asked == 2);
  CHECK(p.bus.stats().duplicated == 1);
}

TEST_CASE("fault filter: delay holds a delivery for n steps") {
  Pair p;
  p.bus.set_filter([](const InMemoryBus::Envelope& e) {
    return e.message.payload == "0" ? InMemoryBus::Fault::delay(2) : InMemoryBus::Fault::deliver();
  });
  p.publish_n(4);
  CHECK(p.bus.deliver_one());  // step 1: "0" delayed until step 3
  CHECK(p.seen.messages.empty());
  CHECK(p.bus.pending() == 4);
  p.bus.deliver_all();
  CHECK(p.seen.payloads() == std::vector<std::string>{"1", "2", "3", "0"});
  CHECK(p.bus.stats().delayed == 1);

  // Only delayed deliveries left: steps still advance time.
  p.publish_n(1);
  p.bus.set_filter([](const InMemoryBus::Envelope&) { return InMemoryBus::Fault::delay(3); });
  CHECK(p.bus.deliver_all() == 4);
  CHECK(p.seen.messages.size() == 5);
}

TEST_CASE("reorder shuffles pending deliveries deterministically by seed") {
  auto run = [](uint64_t seed) {
    Pair p;
    p.publish_n(8);
    SeededRandom random(seed);
    p.bus.reorder(random);
    p.bus.deliver_all();
    return p.seen.payloads();
  };
  std::vector<std::string> in_order{"0", "1", "2", "3", "4", "5", "6", "7"};
  auto a = run(42);
  CHECK(a == run(42));
  CHECK(a != in_order);
  std::vector<std::string> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == in_order);
}

TEST_CASE("partition: traffic lost both ways, connect fails, healing restores flow") {
  Pair p;
  p.bus.partition("sub", true);
  p.publish_n(1);
  p.bus.deliver_all();
  CHECK(p.seen.messages.empty());
  CHECK(p.sub->connected());  // it cannot tell
  CHECK(p.sub->publish(msg("t/y", "lost")));
  CHECK(p.bus.pending() == 0);
  CHECK(p.bus.stats().dropped_partition == 2);

  p.bus.disconnect("sub");  // keep-alive timeout
  CHECK(p.sub->connect().error().code == "unreachable");
  CHECK_FALSE(p.bus.reconnect("sub"));
  p.bus.partition("sub", false);
  CHECK(p.bus.reconnect("sub"));
  p.publish_n(1);
  p.bus.deliver_all();
  CHECK(p.seen.payloads() == std::vector<std::string>{"0"});
}

TEST_CASE("bounded queues: overflow drops and counts") {
  InMemoryBus bus(InMemoryBus::Limits{/*max_pending=*/2, /*max_session_queue=*/1});
  auto sub = bus.make_client("sub");
  auto pub = bus.make_client("pub");
  REQUIRE(sub->connect());
  REQUIRE(pub->connect());
  REQUIRE(sub->subscribe("t"));
  CHECK(pub->publish(msg("t", "1")));
  CHECK(pub->publish(msg("t", "2")));
  CHECK(pub->publish(msg("t", "3")).error().code == "queue_full");
  CHECK(bus.stats().dropped_overflow == 1);
  bus.deliver_all();

  sub->disconnect();
  CHECK(pub->publish(msg("t", "a")));
  CHECK(pub->publish(msg("t", "b")));  // session queue holds one
  CHECK(bus.stats().dropped_overflow == 2);
}

TEST_CASE("session takeover and handlers that destroy their client") {
  InMemoryBus bus;
  auto first = bus.make_client("dev");
  Seen first_seen;
  first_seen.attach(*first);
  REQUIRE(first->connect());
  auto second = bus.make_client("dev");
  REQUIRE(second->connect());
  CHECK(first_seen.connection == std::vector<bool>{true, false});
  CHECK_FALSE(first->connected());
  CHECK(second->connected());

  auto pub = bus.make_client("pub");
  REQUIRE(pub->connect());
  REQUIRE(second->subscribe("t"));
  second->on_message([&](const Message&) { second.reset(); });
  REQUIRE(pub->publish(msg("t", "x")));
  REQUIRE(pub->publish(msg("t", "y")));
  bus.deliver_all();  // the second delivery finds no client: queued for the session
  CHECK(second == nullptr);
  CHECK(bus.delivered_count() == 1);
}

TEST_CASE("clients outliving the bus fail cleanly") {
  std::unique_ptr<InMemoryClient> client;
  {
    InMemoryBus bus;
    client = bus.make_client("c");
    REQUIRE(client->connect());
  }
  CHECK_FALSE(client->connected());
  CHECK(client->publish(msg("a", "x")).error().code == "not_connected");
}

}  // namespace
}  // namespace vend
