// Snapshots are atomic with their seq: a snapshot holds every token of every
// event before it, even when another process restocks while it is taken.
#include <doctest/doctest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "core_rig.hpp"

using namespace vend;
using namespace vend::fw;
using vend::fw::test::kDevice;
using vend::fw::test::Rig;

namespace {

// An inventory sensor that runs `during` the first time it is read: the
// moment a snapshot is being taken.
class HookedSensor final : public InventorySensor {
 public:
  std::optional<int> count(int) override {
    if (!fired_ && during) {
      fired_ = true;
      during();
    }
    return std::nullopt;  // no sensed count: the ledger's is reported
  }
  std::function<void()> during;

 private:
  bool fired_ = false;
};

std::vector<proto::DeviceEvent> outbox_events(Ledger& ledger) {
  std::vector<proto::DeviceEvent> out;
  auto rows = ledger.outbox_after(0, 1000);
  REQUIRE(rows.ok());
  for (const auto& row : *rows) {
    auto d = proto::decode_event(row.payload);
    REQUIRE(d.ok());
    out.push_back(d->message);
  }
  return out;
}

}  // namespace

// Fails on the code before this test (snapshot read, then appended in a second
// transaction): the snapshot got seq 3 but held only the 2 tokens of seq 1.
TEST_CASE("a restock committed while a snapshot is taken is in it or after it, never lost") {
  Rig rig;
  rig.restock(1, 2);
  Ledger other = rig.open_ledger();  // a second connection: `vend-firmware restock`
  std::vector<std::string> late;
  HookedSensor sensor;
  sensor.during = [&] {
    auto minted = other.confirm_restock("late", 1, 3, rig.clock.wall_ms(), rig.random);
    REQUIRE(minted.ok());
    late = minted->tokens;
  };
  DeviceCore core(rig.ledger, Hal{&rig.machine, &rig.machine, &sensor, nullptr}, rig.transport,
                  rig.clock, rig.random, rig.log, Rig::default_options());
  REQUIRE(core.boot().ok());
  CHECK(core.on_command(rig.sign(proto::SnapshotRequest{kDevice, "s1", true})).result == "done");
  REQUIRE(late.size() == 3);

  auto events = outbox_events(rig.ledger);
  auto snap = std::find_if(events.begin(), events.end(), [](const proto::DeviceEvent& e) {
    return std::holds_alternative<proto::Snapshot>(e.body);
  });
  REQUIRE(snap != events.end());
  const auto& body = std::get<proto::Snapshot>(snap->body);
  std::set<std::string> in_snapshot;
  for (const auto& s : body.slots) {
    REQUIRE(s.tokens.has_value());
    in_snapshot.insert(s.tokens->begin(), s.tokens->end());
  }
  int minted_before = 0;
  for (const auto& e : events) {
    auto* minted = std::get_if<proto::TokensMinted>(&e.body);
    if (minted == nullptr || e.seq > snap->seq) continue;
    for (const auto& t : minted->tokens) {
      CHECK(in_snapshot.count(t) == 1);
      ++minted_before;
    }
  }
  CHECK(minted_before == 5);  // the restock landed before the snapshot's seq
  CHECK(body.slots.at(0).available_tokens == 5);
  CHECK(body.slots.at(0).digest == crypto::token_digest(rig.ledger.available_tokens(1).value()));
}

// Before snapshots in parts, the snapshot was one event of about
// 420 KB, which the cloud refused (oversize) on every resend.
TEST_CASE("a full snapshot over the message cap is appended as parts with consecutive seqs") {
  Rig rig;
  std::vector<SlotConfig> slots;
  for (int s = 1; s <= 12; ++s) slots.push_back({s, 1000, "p" + std::to_string(s), -1});
  REQUIRE(rig.ledger.sync_slots(slots).ok());
  for (int s = 1; s <= 12; ++s) rig.restock(s, 1000);
  const uint64_t before = rig.ledger.last_seq().value();
  CHECK(rig.send(proto::SnapshotRequest{kDevice, "big", true}).result == "done");

  std::vector<proto::DeviceEvent> parts;
  auto rows = rig.ledger.outbox_after(before, 1000);
  REQUIRE(rows.ok());
  for (const auto& row : *rows) {
    CHECK(row.payload.size() <= proto::kMaxPayloadBytes);
    auto d = proto::decode_event(row.payload);
    REQUIRE(d.ok());
    parts.push_back(d->message);
  }
  const int n = static_cast<int>(parts.size());
  REQUIRE(n == 2);  // 12 x 1000 x 35 bytes: two parts
  std::map<int, std::vector<std::string>> joined;
  for (int i = 0; i < n; ++i) {
    const auto& e = parts[static_cast<size_t>(i)];
    CHECK(e.seq == before + 1 + static_cast<uint64_t>(i));
    const auto& body = std::get<proto::Snapshot>(e.body);
    CHECK(body.part == i + 1);
    CHECK(body.parts == n);
    CHECK(body.request_id == "big");
    for (const auto& s : body.slots) {
      joined[s.slot].insert(joined[s.slot].end(), s.tokens->begin(), s.tokens->end());
    }
  }
  REQUIRE(joined.size() == 12);
  for (const auto& [slot, tokens] : joined) {
    CHECK(tokens == rig.ledger.available_tokens(slot).value());
  }
  // The whole snapshot as one event is refused, and takes no seq.
  auto whole = rig.ledger.snapshot("big", true, nullptr);
  REQUIRE(whole.ok());
  auto refused = rig.ledger.append_event(*whole, rig.clock.wall_ms());
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.error().code == "oversize_event");
  CHECK(rig.ledger.last_seq().value() == before + 2);
}
