// The ledger's identity (docs/protocol.md "Ledgers"): a new ledger names
// itself once, signs its id into every event, keeps it across reopenings,
// and a ledger of older firmware is named at its first open with every held
// event signed again.
#include <doctest/doctest.h>

#include <string>

#include "../../firmware/src/ledger_schema.hpp"  // the v1 schema of older firmware
#include "test_support.hpp"
#include "vend/crypto.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/protocol.hpp"

using namespace vend;
using namespace vend::fw;

namespace {

constexpr const char* kDevice = "vm-1";
const std::string kBootA(32, 'a');
const std::string kBootB(32, 'b');

proto::Decoded<proto::DeviceEvent> held_event(Ledger& ledger, uint64_t seq) {
  auto rows = ledger.outbox_after(seq - 1, 1);
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 1);
  auto decoded = proto::decode_event(rows->front().payload);
  REQUIRE(decoded.ok());
  return *decoded;
}

}  // namespace

TEST_CASE("a new ledger names itself once; every event signs its id; a reader names none") {
  vend::test::TempDir dir;
  const crypto::Key key = crypto::Key::generate();
  const std::string path = dir.file("ledger.db");
  {
    auto reader = Ledger::open(path, Identity{kDevice, key, ""});
    REQUIRE(reader.ok());
    CHECK(reader->identity().ledger_id.empty());
  }
  {
    auto ledger = Ledger::open(path, Identity{kDevice, key, kBootA});
    REQUIRE(ledger.ok());
    CHECK(ledger->identity().ledger_id == kBootA);
    REQUIRE(ledger->append_event(proto::Fault{"test", "", 0}, 1).ok());
    auto event = held_event(*ledger, 1);
    CHECK(event.message.ledger_id == kBootA);
    CHECK(crypto::verify(key, event.canonical, event.mac));
  }
  auto again = Ledger::open(path, Identity{kDevice, key, kBootB});  // a later session
  REQUIRE(again.ok());
  CHECK(again->identity().ledger_id == kBootA);
  auto reader = Ledger::open(path, Identity{kDevice, key, ""});
  REQUIRE(reader.ok());
  CHECK(reader->identity().ledger_id == kBootA);
}

TEST_CASE("a ledger of older firmware is named at its first open, held events signed again") {
  vend::test::TempDir dir;
  const crypto::Key key = crypto::Key::generate();
  const std::string path = dir.file("ledger.db");
  {
    auto db = sql::Database::open(path, {});
    REQUIRE(db.ok());
    REQUIRE(db->migrate({ledger_migrations().front()}).ok());
    proto::DeviceEvent old{kDevice, 7, kBootA, 1, proto::Fault{"jam", "", 1}};
    std::string payload = proto::encode(old, crypto::sign(key, proto::encode_canonical(old)));
    REQUIRE(payload.find("ledger_id") == std::string::npos);
    REQUIRE(db->exec("UPDATE meta SET value = 7 WHERE key = 'last_seq'").ok());
    auto st =
        db->prepare("INSERT INTO outbox(seq, type, payload, created_ms) VALUES (7, 'fault', ?, 1)");
    REQUIRE(st.ok());
    st->bind(1, payload);
    REQUIRE(st->run().ok());
  }
  auto ledger = Ledger::open(path, Identity{kDevice, key, kBootB});
  REQUIRE(ledger.ok());
  CHECK(ledger->identity().ledger_id == kBootB);
  auto event = held_event(*ledger, 7);
  CHECK(event.message.ledger_id == kBootB);
  CHECK(event.message.seq == 7);
  CHECK(std::get<proto::Fault>(event.message.body).code == "jam");
  CHECK(crypto::verify(key, event.canonical, event.mac));
  REQUIRE(ledger->append_event(proto::Fault{"next", "", 0}, 2).ok());
  CHECK(held_event(*ledger, 8).message.ledger_id == kBootB);
}
