#include "vend/fw/ledger.hpp"

#include <string>
#include <utility>
#include <vector>

#include "ledger_internal.hpp"
#include "ledger_schema.hpp"

namespace vend::fw {

using namespace detail;

const char* to_string(TokenState state) { return kTokenStates[static_cast<int>(state)]; }
const char* to_string(DispenseState state) { return kDispenseStates[static_cast<int>(state)]; }

namespace {

// Events written before the ledger had an id (older firmware) are signed
// again with it, so that every event still held names the ledger: the cloud
// then sees one ledger, never a mix of "" and the new id.
Status name_held_events(sql::Database& db, const Identity& identity) {
  std::vector<std::pair<int64_t, std::string>> held;
  auto st = db.prepare("SELECT seq, payload FROM outbox ORDER BY seq");
  if (!st.ok()) return st.error();
  while (true) {
    auto more = st->step();
    if (!more.ok()) return more.error();
    if (!*more) break;
    held.emplace_back(st->column_int64(0), st->column_text(1));
  }
  for (auto& [seq, payload] : held) {
    auto decoded = proto::decode_event(payload);
    if (!decoded.ok())
      return make_error("ledger_corrupt",
                        "outbox seq " + std::to_string(seq) + ": " + decoded.error().message);
    proto::DeviceEvent event = decoded->message;
    event.ledger_id = identity.ledger_id;
    std::string signed_payload =
        proto::encode(event, crypto::sign(identity.key, proto::encode_canonical(event)));
    auto n = run(db, "UPDATE outbox SET payload = ? WHERE seq = ?",
                 [&, seq = seq](sql::Statement& u) { u.bind(1, signed_payload).bind(2, seq); });
    if (!n.ok()) return n.error();
  }
  return {};
}

// The ledger's id: the stored one, or identity.boot_id stored by the first
// opener that signs events ("" = a reader: it names no ledger, and gets ""
// if there is none yet).
Result<std::string> claim_ledger_id(sql::Database& db, const Identity& identity) {
  if (identity.boot_id.empty()) return stored_ledger_id(db);
  return in_transaction<std::string>(db, [&]() -> Result<std::string> {
    auto stored = stored_ledger_id(db);
    if (!stored.ok() || !stored->empty()) return stored;
    auto claimed = run(db, "INSERT INTO ledger_identity(one, ledger_id) VALUES (1, ?)",
                       [&](sql::Statement& st) { st.bind(1, identity.boot_id); });
    if (!claimed.ok()) return claimed.error();
    Identity named = identity;
    named.ledger_id = identity.boot_id;
    if (auto s = name_held_events(db, named); !s.ok()) return s.error();
    return identity.boot_id;
  });
}

}  // namespace

Result<Ledger> Ledger::open(const std::string& path, Identity identity, sql::Sync sync) {
  sql::OpenOptions options;
  options.synchronous = sync;
  auto db = sql::Database::open(path, options);
  if (!db.ok()) return db.error();
  if (auto s = db->migrate(ledger_migrations()); !s.ok()) {
    return Error{s.error().code, "ledger '" + path + "': " + s.error().message};
  }
  auto ledger_id = claim_ledger_id(*db, identity);
  if (!ledger_id.ok()) {
    return Error{ledger_id.error().code, "ledger '" + path + "': " + ledger_id.error().message};
  }
  identity.ledger_id = std::move(ledger_id).value();
  return Ledger(std::move(db).value(), std::move(identity));
}

Status Ledger::sync_slots(const std::vector<SlotConfig>& slots) {
  auto r = in_transaction<int>(db_, [&]() -> Result<int> {
    for (const auto& s : slots) {
      auto n = run(
          db_,
          "INSERT INTO slots(slot, product, capacity) VALUES (?, ?, ?) "
          "ON CONFLICT(slot) DO UPDATE SET product = excluded.product, "
          "capacity = excluded.capacity",
          [&](sql::Statement& st) { st.bind(1, s.slot).bind(2, s.product).bind(3, s.capacity); });
      if (!n.ok()) return n.error();
    }
    return 0;
  });
  if (!r.ok()) return r.error();
  return {};
}

// ---- reads ----------------------------------------------------------------

Result<std::vector<SlotRow>> Ledger::slots() {
  auto st = db_.prepare(
      "SELECT s.slot, s.product, s.capacity, s.physical_count, "
      "(SELECT count(*) FROM tokens t WHERE t.slot = s.slot AND t.state = 'AVAILABLE') "
      "FROM slots s ORDER BY s.slot");
  if (!st.ok()) return st.error();
  std::vector<SlotRow> rows;
  while (true) {
    auto more = st->step();
    if (!more.ok()) return more.error();
    if (!*more) break;
    rows.push_back(SlotRow{st->column_int(0), st->column_text(1), st->column_int(2),
                           st->column_int(3), st->column_int(4)});
  }
  return rows;
}

Result<std::optional<SlotRow>> Ledger::slot(int slot) {
  auto st = db_.prepare(
      "SELECT s.slot, s.product, s.capacity, s.physical_count, "
      "(SELECT count(*) FROM tokens t WHERE t.slot = s.slot AND t.state = 'AVAILABLE') "
      "FROM slots s WHERE s.slot = ?");
  if (!st.ok()) return st.error();
  st->bind(1, slot);
  auto row = st->step();
  if (!row.ok()) return row.error();
  if (!*row) return std::optional<SlotRow>();
  return std::optional<SlotRow>(SlotRow{st->column_int(0), st->column_text(1), st->column_int(2),
                                        st->column_int(3), st->column_int(4)});
}

Result<std::optional<DispenseRow>> Ledger::find_dispense(const std::string& order_id) {
  auto st =
      db_.prepare(std::string("SELECT ") + kDispenseColumns + " FROM dispenses WHERE order_id = ?");
  if (!st.ok()) return st.error();
  st->bind(1, order_id);
  auto row = st->step();
  if (!row.ok()) return row.error();
  if (!*row) return std::optional<DispenseRow>();
  return std::optional<DispenseRow>(read_dispense(*st));
}

Result<std::optional<std::pair<TokenState, int>>> Ledger::find_token(const std::string& token) {
  auto st = db_.prepare("SELECT state, slot FROM tokens WHERE token = ?");
  if (!st.ok()) return st.error();
  st->bind(1, token);
  auto row = st->step();
  if (!row.ok()) return row.error();
  using Found = std::optional<std::pair<TokenState, int>>;
  if (!*row) return Found();
  return Found(std::make_pair(parse_token_state(st->column_text(0)), st->column_int(1)));
}

Result<std::vector<std::string>> Ledger::available_tokens(int slot) {
  auto st = db_.prepare(
      "SELECT token FROM tokens WHERE slot = ? AND state = 'AVAILABLE' ORDER BY position");
  if (!st.ok()) return st.error();
  st->bind(1, slot);
  std::vector<std::string> tokens;
  while (true) {
    auto more = st->step();
    if (!more.ok()) return more.error();
    if (!*more) break;
    tokens.push_back(st->column_text(0));
  }
  return tokens;
}

Result<std::vector<DispenseRow>> Ledger::dispenses_in(DispenseState state) {
  auto st = db_.prepare(std::string("SELECT ") + kDispenseColumns +
                        " FROM dispenses WHERE state = ? ORDER BY accepted_ms, rowid");
  if (!st.ok()) return st.error();
  st->bind(1, to_string(state));
  std::vector<DispenseRow> rows;
  while (true) {
    auto more = st->step();
    if (!more.ok()) return more.error();
    if (!*more) break;
    rows.push_back(read_dispense(*st));
  }
  return rows;
}

Result<int64_t> Ledger::outbox_depth() {
  auto st = db_.prepare("SELECT count(*) FROM outbox");
  if (!st.ok()) return st.error();
  auto row = st->step();
  if (!row.ok()) return row.error();
  return st->column_int64(0);
}

Result<std::vector<OutboxRow>> Ledger::outbox_after(uint64_t seq, int limit) {
  auto st = db_.prepare("SELECT seq, type, payload FROM outbox WHERE seq > ? ORDER BY seq LIMIT ?");
  if (!st.ok()) return st.error();
  st->bind(1, static_cast<int64_t>(seq)).bind(2, limit);
  std::vector<OutboxRow> rows;
  while (true) {
    auto more = st->step();
    if (!more.ok()) return more.error();
    if (!*more) break;
    rows.push_back(OutboxRow{static_cast<uint64_t>(st->column_int64(0)), st->column_text(1),
                             st->column_text(2)});
  }
  return rows;
}

namespace {
Result<uint64_t> read_meta(sql::Database& db, const char* key) {
  auto st = db.prepare("SELECT value FROM meta WHERE key = ?");
  if (!st.ok()) return st.error();
  st->bind(1, key);
  auto row = st->step();
  if (!row.ok()) return row.error();
  if (!*row) return make_error("ledger_corrupt", std::string("meta key '") + key + "' missing");
  return static_cast<uint64_t>(st->column_int64(0));
}
}  // namespace

Result<uint64_t> Ledger::last_seq() { return read_meta(db_, "last_seq"); }
Result<uint64_t> Ledger::acked_seq() { return read_meta(db_, "acked_seq"); }

}  // namespace vend::fw
