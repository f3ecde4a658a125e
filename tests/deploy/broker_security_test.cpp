// The production broker set-up of deploy/mosquitto/ against a real mosquitto
// 2.0: the shipped mosquitto.conf and acl, credentials made by add-user, a
// TLS listener with a throwaway CA (broker_rig.hpp). Every negative check
// ("X does not arrive") waits a bounded 500 ms AFTER a positive control on the
// same path has proved that delivery works, so a broken set-up cannot pass by
// delivering nothing at all.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "broker_rig.hpp"
#include "test_support.hpp"
#include "vend/topics.hpp"

namespace vend::test {
namespace {

using namespace std::chrono_literals;

constexpr auto kArrive = 5s;           // a message that must arrive
constexpr auto kNegativeWait = 500ms;  // after a positive control

const std::vector<std::string> kUsers = {"device:vm-1", "device:vm-2", "agent", "operator"};

struct ClientSpec {
  PahoOptions options;
  std::vector<std::string> filters;
};

struct Attempt {
  std::unique_ptr<MqttClient> client;
  Status status;  // of connect(), then of each subscribe()
};

// Connects every client and subscribes its filters, all at once: Paho notices
// a new socket only at its next 1 s poll (docs/mqtt.md) and a refused TLS
// handshake takes ~2 s, so one after the other would add up. No assertion
// runs on the helper threads.
std::vector<Attempt> attempt_all(const std::vector<ClientSpec>& specs, Logger& log) {
  std::vector<Attempt> attempts(specs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < specs.size(); ++i) {
    attempts[i].client = std::make_unique<MqttClient>(specs[i].options, log);
    threads.emplace_back([&attempt = attempts[i], &spec = specs[i]] {
      attempt.status = attempt.client->connect();
      for (const std::string& filter : spec.filters) {
        if (attempt.status.ok()) attempt.status = attempt.client->transport().subscribe(filter, 1);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  return attempts;
}

// attempt_all() where every client must succeed.
std::vector<std::unique_ptr<MqttClient>> connect_all(const std::vector<ClientSpec>& specs,
                                                     Logger& log) {
  std::vector<std::unique_ptr<MqttClient>> clients;
  for (Attempt& a : attempt_all(specs, log)) {
    INFO(a.client->transport().connected());
    REQUIRE_MESSAGE(a.status.ok(), vend::test::error_text(a.status));
    clients.push_back(std::move(a.client));
  }
  return clients;
}

// A connection the broker must refuse.
void check_refused(Attempt& attempt) {
  CHECK_FALSE(attempt.status.ok());
  CHECK_FALSE(attempt.client->transport().connected());
}

TEST_CASE("credentials: wrong passwords, unknown users and anonymous clients are refused") {
  SecureBroker broker(kUsers);
  for (const std::string& url : {broker.plain_url(), broker.tls_url()}) {
    CAPTURE(url);
    PahoOptions wrong = client_options(broker, url, "vm-1", "vm-1");
    wrong.password = broker.password("vm-2");
    PahoOptions unknown = client_options(broker, url, "vm-1", "vm-9");
    unknown.username = "vm-9";
    NullLogger log;
    auto attempts = attempt_all({{wrong, {}},
                                 {unknown, {}},
                                 {client_options(broker, url, "", "anonymous"), {}},
                                 {client_options(broker, url, "vm-1", "vm-1"), {}}},
                                log);
    check_refused(attempts[0]);
    check_refused(attempts[1]);
    check_refused(attempts[2]);
    // Positive control: the same broker takes the right password.
    CHECK_MESSAGE(attempts[3].status.ok(), broker.log());
  }
  CHECK(broker.log().find("not authorised") != std::string::npos);
}

TEST_CASE("ACL: devices, the agent and operators each stay on their own topics") {
  SecureBroker broker(kUsers);
  NullLogger log;
  const std::string url = broker.plain_url();
  auto clients =
      connect_all({{client_options(broker, url, "vend-agent", "vend-agent"),
                    {topics::all_device_evt(), topics::all_device_status()}},
                   {client_options(broker, url, "vm-1", "vm-1"),
                    {topics::device_cmd("vm-1"), topics::device_cmd("vm-2"), topics::ops_all()}},
                   {client_options(broker, url, "vm-2", "vm-2"), {topics::device_cmd("vm-2")}},
                   {client_options(broker, url, "vend-operator", "op-1"),
                    {topics::ops_all(), "vend/v1/dev/#"}}},
                  log);
  MqttClient* agent = clients[0].get();
  MqttClient* vm1 = clients[1].get();
  MqttClient* vm2 = clients[2].get();
  MqttClient* op = clients[3].get();
  INFO(broker.log());

  // One broker and one set of clients for every step (connecting is slow).
  {
    INFO("a device publishes only its own events and presence");
    REQUIRE(vm1->publish(topics::device_evt("vm-2"), "forged-evt").ok());
    REQUIRE(vm1->publish(topics::device_status("vm-2"), "forged-status", true).ok());
    REQUIRE(vm1->publish(topics::device_evt("vm-1"), "own-evt").ok());
    REQUIRE(vm1->publish(topics::device_status("vm-1"), "own-status", true).ok());
    REQUIRE(agent->wait_for(topics::device_evt("vm-1"), "own-evt", kArrive));
    REQUIRE(agent->wait_for(topics::device_status("vm-1"), "own-status", kArrive));
    std::this_thread::sleep_for(kNegativeWait);
    CHECK_FALSE(agent->received(topics::device_evt("vm-2"), "forged-evt"));
    CHECK_FALSE(agent->received(topics::device_status("vm-2"), "forged-status"));
    CHECK(op->received_under("vend/v1/dev/").empty());  // operators do not read device traffic
  }

  {
    INFO("a device reads only its own commands and cannot send any");
    REQUIRE(vm1->publish(topics::device_cmd("vm-2"), "forged-cmd").ok());
    REQUIRE(agent->publish(topics::device_cmd("vm-2"), "cmd-for-vm-2").ok());
    REQUIRE(agent->publish(topics::device_cmd("vm-1"), "cmd-for-vm-1").ok());
    REQUIRE(vm2->wait_for(topics::device_cmd("vm-2"), "cmd-for-vm-2", kArrive));
    REQUIRE(vm1->wait_for(topics::device_cmd("vm-1"), "cmd-for-vm-1", kArrive));
    std::this_thread::sleep_for(kNegativeWait);
    CHECK(vm1->received_under(topics::device_cmd("vm-2")).empty());
    CHECK_FALSE(vm2->received(topics::device_cmd("vm-2"), "forged-cmd"));
  }

  {
    INFO("operators read the ops views and write nothing");
    REQUIRE(op->publish(topics::device_cmd("vm-1"), "operator-cmd").ok());
    REQUIRE(op->publish(topics::ops_alerts(), "operator-alert").ok());
    // The ACL's %u patterns apply to vend-operator too; its deny must win.
    REQUIRE(op->publish(topics::device_evt("vend-operator"), "operator-as-device").ok());
    REQUIRE(agent->publish(topics::ops_fleet(), "fleet-1", true).ok());
    REQUIRE(agent->publish(topics::device_cmd("vm-1"), "agent-cmd").ok());
    REQUIRE(vm1->publish(topics::device_evt("vm-1"), "after-operator").ok());
    REQUIRE(op->wait_for(topics::ops_fleet(), "fleet-1", kArrive));
    REQUIRE(vm1->wait_for(topics::device_cmd("vm-1"), "agent-cmd", kArrive));
    REQUIRE(agent->wait_for(topics::device_evt("vm-1"), "after-operator", kArrive));
    std::this_thread::sleep_for(kNegativeWait);
    CHECK_FALSE(vm1->received(topics::device_cmd("vm-1"), "operator-cmd"));
    CHECK_FALSE(op->received(topics::ops_alerts(), "operator-alert"));
    CHECK_FALSE(agent->received(topics::device_evt("vend-operator"), "operator-as-device"));
    CHECK(vm1->received_under("vend/v1/ops/").empty());  // devices do not read ops views
  }

  {
    INFO("the agent cannot pose as a device through the ACL's patterns");
    REQUIRE(agent->publish(topics::device_evt("vend-agent"), "agent-as-device").ok());
    REQUIRE(vm1->publish(topics::device_evt("vm-1"), "after-agent").ok());
    REQUIRE(agent->wait_for(topics::device_evt("vm-1"), "after-agent", kArrive));
    std::this_thread::sleep_for(kNegativeWait);
    CHECK_FALSE(agent->received(topics::device_evt("vend-agent"), "agent-as-device"));
  }
}

TEST_CASE("TLS listener: the broker's CA is required") {
  SecureBroker broker(kUsers);
  NullLogger log;
  INFO(broker.log());
  const std::string url = broker.tls_url();
  auto clients = connect_all(
      {{client_options(broker, url, "vend-agent", "vend-agent"), {topics::all_device_evt()}},
       {client_options(broker, url, "vm-1", "vm-1"), {}}},
      log);
  MqttClient* agent = clients[0].get();
  MqttClient* vm1 = clients[1].get();
  REQUIRE(vm1->publish(topics::device_evt("vm-1"), "over-tls").ok());
  CHECK(agent->wait_for(topics::device_evt("vm-1"), "over-tls", kArrive));
  // One client without the test CA (the system trust store does not know
  // it), one speaking plain MQTT to the TLS port.
  PahoOptions no_ca = client_options(broker, url, "vm-1", "vm-1b");
  no_ca.tls = PahoTlsOptions{};
  std::string plain_to_tls = "tcp://127.0.0.1:" + url.substr(url.rfind(':') + 1);
  auto attempts =
      attempt_all({{no_ca, {}}, {client_options(broker, plain_to_tls, "vm-1", "vm-1c"), {}}}, log);
  check_refused(attempts[0]);
  check_refused(attempts[1]);
}

// A device credential that claims the agent's or another machine's client id
// would, by default, disconnect that client and inherit its persistent
// session. On every listener the broker gives it its own id (its username,
// use_username_as_clientid) or refuses it; the victims stay connected and
// their traffic keeps flowing.
TEST_CASE("no credential takes over another client's id, on either listener") {
  std::vector<std::string> users = kUsers;
  users.push_back("device:vm-3");
  SecureBroker broker(users);
  NullLogger log;
  INFO(broker.log());
  for (const std::string& url : {broker.plain_url(), broker.tls_url()}) {
    CAPTURE(url);
    auto victims = connect_all(
        {{client_options(broker, url, "vend-agent", "vend-agent"), {topics::all_device_evt()}},
         {client_options(broker, url, "vm-1", "vm-1"), {topics::device_cmd("vm-1")}}},
        log);
    MqttClient* agent = victims[0].get();
    MqttClient* vm1 = victims[1].get();
    // Later connections: without the protection the later one wins the id.
    auto thieves = attempt_all({{client_options(broker, url, "vm-2", "vend-agent"), {}},
                                {client_options(broker, url, "vm-3", "vm-1"), {}}},
                               log);
    const std::string thief_users[] = {"vm-2", "vm-3"};
    for (size_t i = 0; i < thieves.size(); ++i) {
      if (!thieves[i].status.ok()) continue;  // refused: fine too
      // A live thief speaks as its own username only.
      const std::string& own = thief_users[i];
      REQUIRE(thieves[i].client->publish(topics::device_evt(own), "thief-" + own).ok());
      CHECK(agent->wait_for(topics::device_evt(own), "thief-" + own, kArrive));
    }
    // Both victims' sessions still carry traffic, both ways.
    CHECK(vm1->publish(topics::device_evt("vm-1"), "victim-evt").ok());
    CHECK(agent->publish(topics::device_cmd("vm-1"), "victim-cmd").ok());
    CHECK(agent->wait_for(topics::device_evt("vm-1"), "victim-evt", kArrive));
    CHECK(vm1->wait_for(topics::device_cmd("vm-1"), "victim-cmd", kArrive));
    std::this_thread::sleep_for(kNegativeWait);
    CHECK(agent->transport().connected());
    CHECK(vm1->transport().connected());
    CHECK(agent->connection_losses() == 0);
    CHECK(vm1->connection_losses() == 0);
  }
}

// Issue 35: with one vend-agent user for every instance, the broker (which
// makes the username the client id) let the instances take each other's
// session over in turn. One credential per instance: all stay connected.
TEST_CASE("several agents: one credential each, no instance takes over another's session") {
  std::vector<std::string> users = kUsers;
  users.insert(users.end(), {"agent:a", "agent:b"});
  SecureBroker broker(users);
  NullLogger log;
  INFO(broker.log());
  const std::string url = broker.plain_url();
  auto clients =
      connect_all({{client_options(broker, url, "vend-agent-a", "vend-agent-a"),
                    {topics::all_device_evt(), topics::all_device_status()}},
                   {client_options(broker, url, "vend-agent-b", "vend-agent-b"),
                    {topics::all_device_evt(), topics::all_device_status()}},
                   {client_options(broker, url, "vm-1", "vm-1"), {topics::device_cmd("vm-1")}}},
                  log);
  MqttClient* a = clients[0].get();
  MqttClient* b = clients[1].get();
  MqttClient* vm1 = clients[2].get();
  // Each instance has the agent's grants: it reads events and sends commands.
  REQUIRE(vm1->publish(topics::device_evt("vm-1"), "evt-1").ok());
  CHECK(a->wait_for(topics::device_evt("vm-1"), "evt-1", kArrive));
  CHECK(b->wait_for(topics::device_evt("vm-1"), "evt-1", kArrive));
  REQUIRE(a->publish(topics::device_cmd("vm-1"), "cmd-a").ok());
  REQUIRE(b->publish(topics::device_cmd("vm-1"), "cmd-b").ok());
  CHECK(vm1->wait_for(topics::device_cmd("vm-1"), "cmd-a", kArrive));
  CHECK(vm1->wait_for(topics::device_cmd("vm-1"), "cmd-b", kArrive));
  // No device may be named after an instance: its %u grants would be the
  // instance's own topics (add-user refuses it).
  const char* source = std::getenv("VEND_SOURCE_DIR");
  REQUIRE(source != nullptr);
  TempDir dir;
  Child refused({std::string(source) + "/deploy/mosquitto/add-user", "--passwd", dir.file("passwd"),
                 "device", "vend-agent-a"},
                dir.file("add-user.log"));
  CHECK(refused.wait(std::chrono::seconds(10)) == 2);
  CHECK(read_file(dir.file("add-user.log")).find("reserved") != std::string::npos);
  std::this_thread::sleep_for(kNegativeWait);
  CHECK(a->connection_losses() == 0);
  CHECK(b->connection_losses() == 0);
  CHECK(a->transport().connected());
  CHECK(b->transport().connected());

  // The shared user the instances had before: the second connection takes
  // the first one's client id (its username) and the broker drops the first.
  auto first = connect_all({{client_options(broker, url, "vend-agent", "vend-agent"), {}}}, log);
  auto second = connect_all({{client_options(broker, url, "vend-agent", "vend-agent"), {}}}, log);
  bool dropped = false;
  for (int i = 0; i < 50 && !dropped; ++i) {
    dropped = first[0]->connection_losses() > 0 || !first[0]->transport().connected();
    if (!dropped) std::this_thread::sleep_for(100ms);
  }
  CHECK(dropped);
}

}  // namespace
}  // namespace vend::test
