// The core's hook for updates: an authenticated, fresh update command goes to
// the update handler; without one it is refused; a forged or expired one
// never reaches it. Reports go through the outbox.
#include <doctest/doctest.h>

#include <string>

#include "core_rig.hpp"

namespace vend::fw {
namespace {

using test::kDevice;
using test::Rig;

proto::UpdateCommand update_command(int64_t expires_at_ms) {
  return proto::UpdateCommand{kDevice,
                              "upd-1",
                              "0.2.0",
                              "http://127.0.0.1/fw.deb",
                              100,
                              std::string(64, 'a'),
                              std::string(128, 'b'),
                              expires_at_ms};
}

TEST_CASE("update commands reach the update handler only signed, fresh and addressed here") {
  Rig rig;
  CHECK(rig.send(update_command(rig.clock.wall_ms() + 30'000)).reason == "unsupported");
  int handled = 0;
  rig.core->set_update_handler([&](const proto::UpdateCommand& c) {
    ++handled;
    CHECK(c.update_id == "upd-1");
    return CommandOutcome{"update", "accepted", c.update_id};
  });
  CHECK(rig.send(update_command(rig.clock.wall_ms() + 30'000)).result == "accepted");
  CHECK(handled == 1);
  crypto::Key other = crypto::Key::generate();
  CHECK(
      rig.core->on_command(rig.sign(update_command(rig.clock.wall_ms() + 30'000), &other)).reason ==
      proto::reason::kBadMac);
  CHECK(rig.send(update_command(rig.clock.wall_ms() - 1)).reason == proto::reason::kExpired);
  CHECK(handled == 1);
}

TEST_CASE("report_event puts an update_status in the outbox and publishes it") {
  Rig rig;
  rig.connect();
  proto::UpdateStatus status{"upd-1", proto::UpdateState::kInstalled, "0.2.0", ""};
  REQUIRE(rig.core->report_event(status).ok());
  CHECK(rig.ledger.outbox_depth().value() == 1);
  rig.run_for(100);
  bool published = false;
  for (const auto& m : rig.transport.published) {
    auto e = proto::decode_event(m.payload);
    if (e.ok() && std::holds_alternative<proto::UpdateStatus>(e->message.body)) {
      published = std::get<proto::UpdateStatus>(e->message.body) == status;
    }
  }
  CHECK(published);
}

}  // namespace
}  // namespace vend::fw
