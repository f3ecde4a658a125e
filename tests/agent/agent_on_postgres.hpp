// vend-agent as a child process on a PostgreSQL log, for the end-to-end
// tests on PostgreSQL (one agent, several agents): start, kill -9, restart on
// the same address, database and secrets, and its HTTP API as a client
// (following the redirects of several agents to a machine's owner).
#pragma once

#include <doctest/doctest.h>
#include <httplib.h>

#include <chrono>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "e2e_support.hpp"
#include "test_support.hpp"

namespace vend::agent::test_rig {

using namespace std::chrono_literals;
using Json = nlohmann::json;

// One vend-agent process on the PostgreSQL log; restartable on the same
// address, database and secrets.
class AgentOnPostgres {
 public:
  // `name`: its log file's (and, with several, its --instance-id's).
  AgentOnPostgres(const test::TempDir& dir, std::string db_url, std::string mqtt_url,
                  std::vector<std::string> extra_args = {}, std::string name = "agent")
      : dir_(dir),
        db_url_(std::move(db_url)),
        mqtt_url_(std::move(mqtt_url)),
        extra_(std::move(extra_args)),
        name_(std::move(name)),
        port_(test::free_port()) {}
  void start() {
    std::vector<std::string> args{test::binary_path("cloud-agent/vend-agent"),
                                  "--http",
                                  "127.0.0.1:" + std::to_string(port_),
                                  "--mqtt",
                                  mqtt_url_,
                                  "--db",
                                  db_url_,
                                  "--operator-token-file",
                                  dir_.file("operator.token"),
                                  "--gateway-secret-file",
                                  dir_.file("gateway.secret")};
    args.insert(args.end(), extra_.begin(), extra_.end());
    child_ = std::make_unique<test::Child>(args, dir_.file(name_ + ".log"));
    REQUIRE_MESSAGE(eventually(
                        [&] {
                          httplib::Client c("127.0.0.1", port_);
                          auto r = c.Get("/healthz");
                          return r && r->status == 200;
                        },
                        20s),
                    log());
  }
  void kill9() { child_->kill_now(); }
  test::Child& child() { return *child_; }
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return test::read_file(dir_.file(name_ + ".log")); }
  Json call(const std::string& method, const std::string& path, const std::string& body, int expect,
            httplib::Headers headers = {}) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    c.set_follow_location(true);  // several agents: 307 to the machine's owner
    if (operator_) {
      headers.emplace("Authorization",
                      "Bearer " + trim(test::read_file(dir_.file("operator.token"))));
    }
    auto r = method == "GET" ? c.Get(path.c_str(), headers)
                             : c.Post(path.c_str(), headers, body, "application/json");
    REQUIRE_MESSAGE(r, "no HTTP response: " << httplib::to_string(r.error()));
    INFO(r->body);
    if (expect != 0) REQUIRE(r->status == expect);
    return Json::parse(r->body);
  }
  Json as_operator(const std::string& method, const std::string& path, const std::string& body,
                   int expect) {
    operator_ = true;
    Json j = call(method, path, body, expect);
    operator_ = false;
    return j;
  }
  // The gateway's signed notification (the signature as docs/agent.md makes it).
  void pay(const std::string& order_id, const std::string& payment_id) {
    std::string body = payment_body(payment_id);
    call("POST", "/v1/orders/" + order_id + "/payment", body, 200,
         {{"Vend-Signature", signature(order_id, body)}});
  }
  static std::string payment_body(const std::string& payment_id) {
    return R"({"payment_id":")" + payment_id + R"(","amount_cents":150})";
  }
  // The Vend-Signature of a notification `body` for `order_id`, made now.
  std::string signature(const std::string& order_id, const std::string& body) {
    test::Child sig({"/bin/sh", "-c",
                     "t=$(date +%s); printf 't=%s,v1=' \"$t\"; printf '%s' \"$t.$2.$0\" | "
                     "\"$3\" dgst -sha256 -hmac \"$1\" | sed 's/^.* //'",
                     body, trim(test::read_file(dir_.file("gateway.secret"))), order_id,
                     test::require_program("openssl", "openssl")},
                    dir_.file("sig.out"));
    REQUIRE(sig.wait(20s) == 0);
    std::string signature = trim(test::read_file(dir_.file("sig.out")));
    std::remove(dir_.file("sig.out").c_str());
    return signature;
  }
  std::string order_state(const std::string& id) {
    return call("GET", "/v1/orders/" + id, "", 200)["state"];
  }

 private:
  const test::TempDir& dir_;
  std::string db_url_, mqtt_url_;
  std::vector<std::string> extra_;
  std::string name_;
  int port_;
  bool operator_ = false;
  std::unique_ptr<test::Child> child_;
};

}  // namespace vend::agent::test_rig
