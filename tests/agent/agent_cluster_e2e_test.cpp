// Several vend-agent instances on one PostgreSQL, end to end with the real
// binaries (tests/support PostgresServer, mosquitto, vend-agent × 3 with
// --instance-id, vend-firmware × 4): the shards spread over the three,
// every machine is served by exactly one, requests to another instance are
// redirected (307) to the owner -- orders and every per-machine operator
// route, which vendctl follows -- a kill -9 of an owner moves its machines to
// the others, which serve them within the lease, a SIGSTOPped instance
// loses its shards and, resumed, neither sells nor writes for them, and
// restarts rejoin. Nothing is sold twice and every paid order completes.
// Bad configuration (the same instance id twice, another shard count) is
// refused at start. It runs on an anonymous broker and again on the shipped
// production broker config (deploy/mosquitto: passwords, the ACL, one
// credential per instance, client id = username).
#include <doctest/doctest.h>
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "agent_on_postgres.hpp"
#include "broker_rig.hpp"
#include "cluster/shard_map.hpp"
#include "test_support.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;
using test_rig::AgentOnPostgres;
using test_rig::eventually;

constexpr int kShards = 64;
const std::vector<std::string> kIds = {"a", "b", "c"};

const std::vector<std::string> kMachines = {"vm-c-1", "vm-c-2", "vm-c-3", "vm-c-4", "vm-c-5"};

// The production broker: a user per instance and per machine.
std::unique_ptr<test::SecureBroker> production_broker() {
  std::vector<std::string> users;
  for (const auto& id : kIds) users.push_back("agent:" + id);
  for (const auto& m : kMachines) users.push_back("device:" + m);
  return std::make_unique<test::SecureBroker>(users);
}

struct Cluster {
  test::TempDir dir;
  test::PostgresServer postgres;
  std::unique_ptr<test::MosquittoServer> plain;  // anonymous, or
  std::unique_ptr<test::SecureBroker> secure;    // the production config
  std::vector<std::unique_ptr<AgentOnPostgres>> agents;
  std::vector<bool> up;
  int orders_placed = 0;  // makes each order()'s idempotency key
  std::vector<std::unique_ptr<test::Child>> devices;

  explicit Cluster(bool production) {
    if (production) {
      secure = production_broker();
    } else {
      plain = std::make_unique<test::MosquittoServer>();
    }
    postgres.create_database("vend");
    for (const auto& id : kIds) {
      agents.push_back(std::make_unique<AgentOnPostgres>(dir, postgres.url("vend"), broker_url(),
                                                         cluster_args(id), "agent-" + id));
      up.push_back(false);
    }
  }
  // The loopback listener of the production config: its passwords and ACL.
  std::string broker_url() const { return secure ? secure->plain_url() : plain->url(); }
  std::vector<std::string> cluster_args(const std::string& id) const {
    std::vector<std::string> args = {"--instance-id", id,    "--lease-ms",  "2000",
                                     "--renew-ms",    "500", "--log-level", "info"};
    if (secure) {
      args.insert(args.end(), {"--mqtt-username", "vend-agent-" + id, "--mqtt-password-file",
                               secure->password_file("vend-agent-" + id)});
    }
    return args;
  }
  std::string logs() {
    std::string out;
    for (size_t i = 0; i < agents.size(); ++i) {
      out += "\n--- agent " + kIds[i] + " ---\n" + agents[i]->log();
    }
    return out;
  }
  size_t any_up() const {
    for (size_t i = 0; i < up.size(); ++i) {
      if (up[i]) return i;
    }
    FAIL("no agent is up");
    return 0;
  }
  Json view(size_t i) { return agents[i]->as_operator("GET", "/v1/cluster", "", 200); }
  // Every shard held by a live instance among the `live` ones, each of them
  // holding some.
  bool settled(const std::vector<size_t>& live) {
    std::map<std::string, int> held;
    for (size_t i : live) {
      Json v = view(i);
      if (v["members"].size() != live.size()) return false;
      held[kIds[i]] = v["shards_held"];
    }
    int total = 0;
    for (auto& [id, n] : held) {
      if (n == 0) return false;
      total += n;
    }
    return total == kShards;
  }
  // The index of the instance serving `device` now, per the lease table.
  std::optional<size_t> owner_of(const std::string& device) {
    Json v = view(any_up());
    const Json& lease = v["shards"][shard_of(device, kShards)];
    if (!lease["live"].get<bool>()) return std::nullopt;
    auto it = std::find(kIds.begin(), kIds.end(), lease["owner"].get<std::string>());
    if (it == kIds.end()) return std::nullopt;
    return static_cast<size_t>(it - kIds.begin());
  }
  void start_device(const std::string& id, const std::string& key) {
    test::write_private_file(dir.file(id + ".key"), key + "\n");
    Json config = {{"device_id", id},
                   {"key_file", id + ".key"},
                   {"broker_url", broker_url()},
                   {"ledger_path", dir.file(id + ".db")},
                   {"slots", Json::array({{{"slot", 1}, {"capacity", 10}, {"product", "cola"}}})},
                   {"sim", {{"motor_run_ms", 50}}},
                   {"core", {{"reconnect_jitter_max_ms", 0}, {"auto_confirm_restock", true}}}};
    if (secure) {
      config["username"] = id;
      config["password_file"] = secure->password_file(id);
    }
    test::write_file(dir.file(id + ".json"), config.dump(2));
    devices.push_back(std::make_unique<test::Child>(
        std::vector<std::string>{test::binary_path("firmware/vend-firmware"), "--config",
                                 dir.file(id + ".json")},
        dir.file(id + ".log")));
  }
  // An operator call through `via`, retried while the machine's shard is
  // moving (503 + Retry-After, the documented answer).
  // A success body has no "error".
  Json operate(size_t via, const std::string& method, const std::string& path,
               const std::string& body) {
    Json out;
    bool ok = eventually(
        [&] {
          out = agents[via]->as_operator(method, path, body, 0);
          return !out.contains("error") || out["error"]["code"] != "unavailable";
        },
        15s);
    REQUIRE_MESSAGE((ok && !out.contains("error")),
                    method << " " << path << ": " << out.dump() << logs());
    return out;
  }
  Json slot(size_t via, const std::string& device) {
    return operate(via, "GET", "/v1/devices/" + device + "/slots", "")["slots"][0];
  }
  // An order through `via` (redirected to the owner), retried while the
  // machine's shard is moving (503); its id. Retried as a phone does, with
  // one idempotency key: an attempt that reserved but whose answer was lost
  // (a read timeout under a slow build, an owner stopped before it answered)
  // is returned by the retry instead of staying reserved beside a new order.
  std::string order(size_t via, const std::string& device, std::chrono::milliseconds within) {
    std::string id;
    const std::string key = "e2e-" + device + "-" + std::to_string(++orders_placed);
    bool ok = eventually(
        [&] {
          // Short timeouts: a redirect may point at an instance that is
          // paused (its lease not expired yet) or just died.
          httplib::Client client("127.0.0.1", agents[via]->port());
          client.set_follow_location(true);
          client.set_connection_timeout(1, 0);
          client.set_read_timeout(2, 0);
          httplib::Headers headers{{"X-Client-Id", "cluster-e2e"}, {"Idempotency-Key", key}};
          auto r = client.Post("/v1/orders", headers, R"({"device":")" + device + R"(","slot":1})",
                               "application/json");
          if (!r || (r->status != 201 && r->status != 200)) return false;
          id = Json::parse(r->body)["id"];
          return true;
        },
        within);
    REQUIRE_MESSAGE(ok, "no order on " << device << " via " << kIds[via] << logs());
    return id;
  }
  void sale(size_t via, const std::string& device) {
    std::string id = order(via, device, 15s);
    agents[via]->pay(id, "pay-" + id);
    REQUIRE_MESSAGE(eventually([&] { return agents[via]->order_state(id) == "COMPLETED"; }, 30s),
                    device << " " << id << logs());
  }
};

void three_agents_share_a_fleet(bool production) {
  Cluster c(production);
  for (size_t i = 0; i < c.agents.size(); ++i) {
    c.agents[i]->start();
    c.up[i] = true;
  }
  REQUIRE_MESSAGE(eventually([&] { return c.settled({0, 1, 2}); }, 20s), c.logs());

  // Machines provisioned through one instance land at their owners.
  const std::vector<std::string>& machines = kMachines;
  std::map<std::string, int> restocked;
  for (const auto& m : machines) {
    Json d = c.operate(
        0, "POST", "/v1/devices",
        R"({"id":")" + m +
            R"(","slots":[{"slot":1,"product":"cola","price_cents":150,"capacity":10}]})");
    c.start_device(m, d["key"]);
  }
  // Each machine is listed by exactly one instance: its owner.
  std::string listing;
  REQUIRE_MESSAGE(eventually(
                      [&] {
                        std::map<std::string, int> seen;
                        listing.clear();
                        for (size_t i = 0; i < 3; ++i) {
                          Json list = c.agents[i]->as_operator("GET", "/v1/devices", "", 200);
                          listing += kIds[i] + ": " + list.dump() + "\n";
                          for (const Json& d : list["devices"]) {
                            if (d["online"] == true) ++seen[d["id"]];
                          }
                        }
                        for (const auto& m : machines) {
                          if (seen[m] != 1) return false;
                        }
                        return seen.size() == machines.size();
                      },
                      30s),
                  listing << c.logs());
  for (const auto& m : machines) {
    c.operate(1, "POST", "/v1/devices/" + m + "/restock", R"({"slot":1,"count":6})");
    restocked[m] = 6;
  }
  for (const auto& m : machines) {
    REQUIRE_MESSAGE(eventually([&] { return c.slot(2, m)["pool"] == 6; }, 20s), m << c.logs());
  }

  // A request to another instance is redirected to the owner's URL.
  auto owner1 = c.owner_of("vm-c-1");
  REQUIRE(owner1);
  size_t other = (*owner1 + 1) % 3;
  {
    httplib::Client raw("127.0.0.1", c.agents[other]->port());
    auto r = raw.Post("/v1/orders", R"({"device":"vm-c-1","slot":1})", "application/json");
    REQUIRE(r);
    CHECK(r->status == 307);
    CHECK(r->get_header_value("Location") == c.agents[*owner1]->url() + "/v1/orders");
  }
  // Every per-machine request to another instance is redirected to the
  // owner's same path before its handler runs (reads as writes), and
  // followed it is answered there.
  {
    httplib::Client raw("127.0.0.1", c.agents[other]->port());
    httplib::Headers auth{{"Authorization", "Bearer " + test_rig::trim(test::read_file(
                                                            c.dir.file("operator.token")))}};
    const std::string d = "/v1/devices/vm-c-1";
    const std::vector<std::pair<std::string, std::string>> calls = {
        {"GET", d},
        {"GET", d + "/slots"},
        {"GET", d + "/faults"},
        {"PUT", d + "/slots/1"},
        {"POST", d + "/restock"},
        {"POST", d + "/reconcile"},
        {"POST", d + "/rotate-key"},
        {"POST", d + "/decommission"},
        {"GET", "/v1/reconcile/vm-c-1"},
        {"GET", "/v1/machines/vm-c-1/catalog"}};
    for (const auto& [method, path] : calls) {
      auto r = method == "GET"   ? raw.Get(path, auth)
               : method == "PUT" ? raw.Put(path, auth, "{}", "application/json")
                                 : raw.Post(path, auth, "{}", "application/json");
      REQUIRE(r);
      CHECK_MESSAGE(r->status == 307, method << " " << path << ": " << r->status << " " << r->body);
      CHECK_MESSAGE(r->get_header_value("Location") == c.agents[*owner1]->url() + path,
                    method << " " << path);
    }
    Json device = c.agents[other]->as_operator("GET", d, "", 200);
    CHECK(device["id"] == "vm-c-1");
  }
  // vendctl against a non-owner follows the redirect to the owner (a member
  // of the cluster): restock and reconcile succeed there.
  {
    auto vendctl = [&](std::vector<std::string> args) {
      args.insert(args.begin(), test::binary_path("vendctl/vendctl"));
      for (const std::string& a : {std::string("--api"), c.agents[other]->url(),
                                   std::string("--token-file"), c.dir.file("operator.token")}) {
        args.push_back(a);
      }
      test::Child ctl(args, c.dir.file("vendctl.out"));
      int code = ctl.wait(40s);
      return std::make_pair(code, test::read_file(c.dir.file("vendctl.out")));
    };
    auto [restock_code, restock_out] = vendctl({"restock", "vm-c-1", "1", "2"});
    CHECK_MESSAGE(restock_code == 0, restock_out);
    CHECK_MESSAGE(restock_out.find("rst-") != std::string::npos, restock_out);
    restocked["vm-c-1"] += 2;
    REQUIRE_MESSAGE(eventually([&] { return c.slot(other, "vm-c-1")["pool"] == 8; }, 20s),
                    c.logs());
    auto [reconcile_code, reconcile_out] = vendctl({"reconcile", "vm-c-1", "--wait", "30"});
    CHECK_MESSAGE(reconcile_code == 0, reconcile_out);
    CHECK_MESSAGE(reconcile_out.find("moved") == std::string::npos, reconcile_out);
  }
  // A payment for an order id no instance has is its id's shard owner's:
  // redirected there, recorded and refunded once.
  {
    const std::string nobody = "ord-nobody-1";
    auto owner = c.owner_of(nobody);
    REQUIRE(owner);
    auto& front_agent = *c.agents[(*owner + 1) % 3];
    std::string body = front_agent.payment_body("pay-nobody");
    httplib::Client raw("127.0.0.1", front_agent.port());
    auto r = raw.Post("/v1/orders/" + nobody + "/payment",
                      {{"Vend-Signature", front_agent.signature(nobody, body)}}, body,
                      "application/json");
    REQUIRE(r);
    CHECK(r->status == 307);
    CHECK(r->get_header_value("Location") ==
          c.agents[*owner]->url() + "/v1/orders/" + nobody + "/payment");
    c.agents[(*owner + 2) % 3]->pay(nobody, "pay-nobody");  // signed, following the redirect
    Json refunds = c.operate(*owner, "GET", "/v1/refunds", "");
    int found = 0;
    for (const Json& f : refunds["refunds"]) found += f["payment_id"] == "pay-nobody";
    CHECK(found == 1);
  }
  std::map<std::string, int> sold;
  for (const auto& m : machines) {
    c.sale(other, m);
    ++sold[m];
  }

  // kill -9 of vm-c-1's owner: another instance serves it within the lease
  // (2 s) plus a round and the rebuild.
  size_t victim = *owner1;
  c.agents[victim]->kill9();
  c.up[victim] = false;
  auto t0 = std::chrono::steady_clock::now();
  size_t front = (victim + 1) % 3;
  std::string id = c.order(front, "vm-c-1", 15s);
  double failover_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("failover after kill -9: first order served after " << failover_s << " s");
  CHECK(failover_s < 8.0);
  c.agents[front]->pay(id, "pay-" + id);
  REQUIRE_MESSAGE(eventually([&] { return c.agents[front]->order_state(id) == "COMPLETED"; }, 30s),
                  c.logs());
  ++sold["vm-c-1"];

  // SIGSTOP the owner of a machine past its lease: the last one takes over.
  std::vector<size_t> live;
  for (size_t i = 0; i < 3; ++i) {
    if (c.up[i]) live.push_back(i);
  }
  REQUIRE(live.size() == 2);
  size_t paused = live[0], runner = live[1];
  std::string paused_machine;
  for (const auto& m : machines) {
    if (c.owner_of(m) == paused) paused_machine = m;
  }
  c.agents[paused]->child().signal(SIGSTOP);
  c.up[paused] = false;
  if (!paused_machine.empty()) {
    c.sale(runner, paused_machine);
    ++sold[paused_machine];
  }
  c.agents[paused]->child().signal(SIGCONT);
  // Paused in the middle of a group commit, its write session is ended by
  // the server (idle_in_transaction_session_timeout): the agent reconnects
  // its writer and rebuilds. Should it have stopped, it is restarted, as
  // systemd would.
  std::this_thread::sleep_for(3s);
  if (!c.agents[paused]->child().running()) {
    MESSAGE("the paused instance stopped after SIGCONT; restarting it");
    c.agents[paused]->start();
  }
  c.up[paused] = true;
  // Resumed, it finds its leases gone; it serves again only what it wins
  // back, after a rebuild from the database (no stale memory sells).
  REQUIRE_MESSAGE(eventually([&] { return c.settled(live); }, 20s), c.logs());
  for (const auto& m : machines) {
    c.sale(paused, m);
    ++sold[m];
  }

  // The killed instance restarts with its id and takes its share back.
  c.agents[victim]->start();
  c.up[victim] = true;
  REQUIRE_MESSAGE(eventually([&] { return c.settled({0, 1, 2}); }, 20s), c.logs());
  c.sale(victim, "vm-c-1");
  ++sold["vm-c-1"];

  // The promise: every machine sold exactly what was paid, nothing twice.
  for (const auto& m : machines) {
    Json s = c.slot(0, m);
    CHECK_MESSAGE(s["sold"] == sold[m], m << " " << s.dump());
    CHECK_MESSAGE(s["pool"] == restocked[m] - sold[m], m << " " << s.dump());
    CHECK_MESSAGE(s["dispatched"] == 0, m << " " << s.dump());
  }
  std::string text;
  {
    httplib::Client m("127.0.0.1", c.agents[runner]->port());
    auto r = m.Get("/metrics");
    REQUIRE(r);
    text = r->body;
  }
  CHECK(text.find("vend_cluster_shards_held ") != std::string::npos);
  CHECK(text.find("vend_cluster_shards_gained_total ") != std::string::npos);
  CHECK(text.find("vend_cluster_fenced_writes_total ") != std::string::npos);

  if (production) return;  // the configuration checks below need no broker user
  // The same instance id twice: the second process is refused.
  test::Child dup(
      {test::binary_path("cloud-agent/vend-agent"), "--http",
       "127.0.0.1:" + std::to_string(test::free_port()), "--mqtt", c.broker_url(), "--db",
       c.postgres.url("vend"), "--operator-token-file", c.dir.file("operator.token"),
       "--gateway-secret-file", c.dir.file("gateway.secret"), "--instance-id", "a", "--lease-ms",
       "2000", "--renew-ms", "500"},
      c.dir.file("dup.log"));
  int code = dup.wait(30s);
  std::string dup_log = test::read_file(c.dir.file("dup.log"));
  CHECK_MESSAGE(code == 1, dup_log);
  CHECK_MESSAGE(dup_log.find("in use by another live agent") != std::string::npos, dup_log);

  // Another shard count than the database's.
  test::Child shards({test::binary_path("cloud-agent/vend-agent"), "--http",
                      "127.0.0.1:" + std::to_string(test::free_port()), "--mqtt", c.broker_url(),
                      "--db", c.postgres.url("vend"), "--operator-token-file",
                      c.dir.file("operator.token"), "--gateway-secret-file",
                      c.dir.file("gateway.secret"), "--instance-id", "d", "--shards", "32"},
                     c.dir.file("shards.log"));
  code = shards.wait(30s);
  std::string shards_log = test::read_file(c.dir.file("shards.log"));
  CHECK_MESSAGE(code == 1, shards_log);
  CHECK_MESSAGE(shards_log.find("shard count 32 differs from the store's 64") != std::string::npos,
                shards_log);
}

TEST_CASE("three agents share a fleet: ownership, redirects, kill -9, SIGSTOP, rejoin") {
  three_agents_share_a_fleet(false);
}

TEST_CASE("three agents share a fleet on the production broker config (a user per instance)") {
  three_agents_share_a_fleet(true);
}

}  // namespace
}  // namespace vend::agent
