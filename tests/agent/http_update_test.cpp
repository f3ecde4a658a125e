// POST /v1/devices/{id}/update: an operator sends a signed firmware update to
// one device; its update_status events are kept with the device's faults.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <thread>

#include "http_api_rig.hpp"
#include "vend/update_signature.hpp"

namespace vend::agent {
namespace {

constexpr const char* kSha = "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef";

Json update_body() {
  auto key = crypto::generate_update_key();
  std::string signature =
      crypto::sign_update(key.private_hex, crypto::update_manifest("0.2.0", 1843200, kSha)).value();
  return Json{{"version", "0.2.0"},
              {"url", "https://updates.example.com/vend-firmware_0.2.0_arm64.deb"},
              {"size_bytes", 1843200},
              {"sha256", kSha},
              {"signature", signature}};
}

Json with(Json body, const std::string& key, Json value) {
  body[key] = std::move(value);
  return body;
}

TEST_CASE("update: operators only, a strict body, an online device") {
  Agent agent;
  Machine m;
  m.provision(agent);
  const std::string path = "/v1/devices/vm-http-1/update";
  expect_error(post_json(agent, path, update_body().dump()), 401, "unauthorized");
  auto ops = agent.operator_headers();
  expect_error(post_json(agent, "/v1/devices/vm-nope/update", update_body().dump(), ops), 404,
               "not_found");
  expect_error(post_json(agent, path, with(update_body(), "version", "1.2-rc1").dump(), ops), 400,
               "bad_request", "'version'");
  expect_error(post_json(agent, path, with(update_body(), "url", "ftp://x/y").dump(), ops), 400,
               "bad_request", "'url'");
  expect_error(post_json(agent, path, with(update_body(), "signature", "abc").dump(), ops), 400,
               "bad_request", "'signature'");
  expect_error(post_json(agent, path, with(update_body(), "sha256", "ABC").dump(), ops), 400,
               "bad_request", "'sha256'");
  expect_error(post_json(agent, path, with(update_body(), "size_bytes", 0).dump(), ops), 400,
               "bad_request", "size_bytes");
  expect_error(post_json(agent, path, with(update_body(), "force", true).dump(), ops), 400,
               "bad_request", "'force'");
  expect_error(post_json(agent, path, update_body().dump(), ops), 409, "device_offline");

  m.go_online(agent);
  auto r = post_json(agent, path, update_body().dump(), ops);
  Json j = body_of(r);
  REQUIRE(r->status == 202);
  CHECK(j["device"] == "vm-http-1");
  CHECK(j["version"] == "0.2.0");
  const std::string update_id = j["update_id"];
  CHECK(update_id.rfind("upd-", 0) == 0);
  CHECK(agent.log().contains("update " + update_id + " of vm-http-1 to 0.2.0 sent"));
}

TEST_CASE("update_status events are kept with the device's faults") {
  Agent agent;
  Machine m;
  m.provision(agent);
  m.go_online(agent);
  for (auto state : {proto::UpdateState::kDownloading, proto::UpdateState::kRolledBack}) {
    std::string reason = state == proto::UpdateState::kRolledBack ? "crash loop" : "";
    proto::DeviceEvent e{kDevice, ++m.seq, m.boot_id, 1,
                         proto::UpdateStatus{"upd-7", state, "0.2.0", reason}};
    std::string mac = crypto::sign(m.key, proto::encode_canonical(e));
    agent.core().on_message(Message{topics::device_evt(kDevice), proto::encode(e, mac), 1, false});
  }
  Json faults;
  for (int i = 0; i < 200; ++i) {
    faults = body_of(agent.client().Get("/v1/devices/vm-http-1/faults", agent.operator_headers()));
    if (faults["faults"].size() == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(faults["faults"].size() == 2);
  CHECK(faults["faults"][0]["code"] == "update_rolled_back");  // most recent first
  CHECK(faults["faults"][0]["message"] == "version 0.2.0 (upd-7): crash loop");
  CHECK(faults["faults"][1]["code"] == "update_downloading");
}

}  // namespace
}  // namespace vend::agent
