// The agent database schema. Only the repository knows table and column names.
#include "repository/repository_schema.hpp"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "repository/repository.hpp"

namespace vend::agent {

const char* to_string(TokenState state) {
  switch (state) {
    case TokenState::kPool: return "POOL";
    case TokenState::kReserved: return "RESERVED";
    case TokenState::kDispatched: return "DISPATCHED";
    case TokenState::kSold: return "SOLD";
    case TokenState::kBurned: return "BURNED";
  }
  return "?";
}

std::optional<TokenState> parse_token_state(std::string_view text) {
  for (TokenState s : {TokenState::kPool, TokenState::kReserved, TokenState::kDispatched,
                       TokenState::kSold, TokenState::kBurned}) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

const char* to_string(RefundState state) {
  switch (state) {
    case RefundState::kPending: return "PENDING";
    case RefundState::kDelivered: return "DELIVERED";
    case RefundState::kGaveUp: return "GAVE_UP";
  }
  return "?";
}

std::optional<RefundState> parse_refund_state(std::string_view text) {
  for (RefundState s : {RefundState::kPending, RefundState::kDelivered, RefundState::kGaveUp}) {
    if (text == to_string(s)) return s;
  }
  return std::nullopt;
}

namespace detail {

namespace {

// Order and token states are stored as their names; the CHECKs make a bad
// write fail loudly instead of storing a state no code understands.
// Restock ids are per device: a machine may confirm restocks of its own,
// with ids only unique on that machine.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE devices(
  id TEXT PRIMARY KEY,
  key_hex TEXT NOT NULL,
  created_ms INTEGER NOT NULL);
CREATE TABLE slots(
  device TEXT NOT NULL REFERENCES devices(id),
  slot INTEGER NOT NULL CHECK(slot BETWEEN 1 AND 255),
  product TEXT NOT NULL,
  price_cents INTEGER NOT NULL CHECK(price_cents >= 0),
  capacity INTEGER NOT NULL,
  PRIMARY KEY(device, slot));
CREATE TABLE pool_tokens(
  token TEXT PRIMARY KEY,
  device TEXT NOT NULL,
  slot INTEGER NOT NULL,
  restock_id TEXT NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('POOL','RESERVED','DISPATCHED','SOLD','BURNED')),
  order_id TEXT);
CREATE INDEX pool_tokens_by_slot ON pool_tokens(device, slot, state);
CREATE TABLE restocks(
  restock_id TEXT NOT NULL,
  device TEXT NOT NULL,
  slot INTEGER NOT NULL,
  count INTEGER NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('REQUESTED','MINTED')),
  updated_ms INTEGER NOT NULL,
  PRIMARY KEY(device, restock_id));
CREATE TABLE orders(
  id TEXT PRIMARY KEY,
  device TEXT NOT NULL,
  slot INTEGER NOT NULL,
  token TEXT NOT NULL,
  price_cents INTEGER NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('RESERVED','PAID','DISPATCHED','COMPLETED','EXPIRED',
                                      'CANCELLED','FAILED','REFUNDED','NEEDS_REVIEW')),
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  reserve_deadline_ms INTEGER NOT NULL,
  dispatch_expires_at_ms INTEGER NOT NULL,
  payment_id TEXT UNIQUE,
  reason TEXT NOT NULL DEFAULT '',
  idempotency_key TEXT UNIQUE);
CREATE INDEX orders_by_state ON orders(state);
CREATE INDEX orders_by_updated ON orders(updated_ms);
CREATE TABLE payments(
  payment_id TEXT PRIMARY KEY,
  order_id TEXT NOT NULL,
  amount_cents INTEGER NOT NULL,
  outcome TEXT NOT NULL,
  at_ms INTEGER NOT NULL);
CREATE INDEX payments_by_order ON payments(order_id);
CREATE TABLE refunds(
  payment_id TEXT PRIMARY KEY,
  order_id TEXT NOT NULL,
  amount_cents INTEGER NOT NULL,
  reason TEXT NOT NULL,
  at_ms INTEGER NOT NULL);
CREATE INDEX refunds_by_order ON refunds(order_id);
CREATE TABLE device_seq(
  device TEXT PRIMARY KEY,
  last_processed_seq INTEGER NOT NULL);
CREATE TABLE snapshots(
  device TEXT PRIMARY KEY,
  payload TEXT NOT NULL,
  at_ms INTEGER NOT NULL);
CREATE TABLE faults(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  device TEXT NOT NULL,
  code TEXT NOT NULL,
  message TEXT NOT NULL,
  slot INTEGER NOT NULL,
  at_ms INTEGER NOT NULL);
CREATE TABLE order_events(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  order_id TEXT NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  detail TEXT NOT NULL DEFAULT '');
CREATE INDEX order_events_by_order ON order_events(order_id);
)sql";

}  // namespace

// v2: the latest reconciliation report per device (JSON, vend/ops.hpp).
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE reconcile_reports(
  device TEXT PRIMARY KEY,
  report TEXT NOT NULL,
  at_ms INTEGER NOT NULL
);
)sql";

// v3: the refund outbox. Refunds recorded before it are delivered too.
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE refunds ADD COLUMN state TEXT NOT NULL DEFAULT 'PENDING'
  CHECK(state IN ('PENDING','DELIVERED','GAVE_UP'));
ALTER TABLE refunds ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE refunds ADD COLUMN last_error TEXT NOT NULL DEFAULT '';
ALTER TABLE refunds ADD COLUMN updated_ms INTEGER NOT NULL DEFAULT 0;
CREATE INDEX refunds_by_state ON refunds(state, updated_ms);
)sql";

// v4: replaceable boards. device_seq counts the seqs of one ledger (a device
// ledger's id, "" for firmware that sends none); a ledger replaced by a new
// one (reflashed SD card, new board) is retired, and its events are refused.
// A device's pending new key (rotation, "" = none) and its decommissioning.
constexpr const char* kSchemaV4 = R"sql(
ALTER TABLE devices ADD COLUMN next_key_hex TEXT NOT NULL DEFAULT '';
ALTER TABLE devices ADD COLUMN decommissioned_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE device_seq ADD COLUMN ledger_id TEXT NOT NULL DEFAULT '';
CREATE TABLE retired_ledgers(
  device TEXT NOT NULL,
  ledger_id TEXT NOT NULL,
  last_processed_seq INTEGER NOT NULL,
  retired_ms INTEGER NOT NULL,
  PRIMARY KEY(device, ledger_id));
)sql";

// v5: the tokens' slot index without the state. With the state in its key,
// every token move (two per paid order) deleted and inserted an index entry,
// dirtying 2-3 more pages per paid order, each written to the WAL at commit
// (benchmark 3: 2.8 of 10 pages). The counts per slot and state read the
// slot's rows instead. One transaction with the version bump: a crash leaves
// v4 or v5, never neither.
constexpr const char* kSchemaV5 = R"sql(
DROP INDEX pool_tokens_by_slot;
CREATE INDEX pool_tokens_by_device_slot ON pool_tokens(device, slot);
)sql";

// v7: who reserved each order (Order::client), so that a restarted agent
// counts the open reservations against their clients' caps again. Orders
// written before it have none ('').
constexpr const char* kSchemaV7 = R"sql(
ALTER TABLE orders ADD COLUMN client TEXT NOT NULL DEFAULT '';
)sql";

// v8: each refund's machine (StoredRefund::device): with several agents the
// machine's owner delivers it and fences its writes, also once the order
// has left memory. Refunds written before it have none ('').
constexpr const char* kSchemaV8 = R"sql(
ALTER TABLE refunds ADD COLUMN device TEXT NOT NULL DEFAULT '';
)sql";

// v9: what a load reads, bounded by the live rows of the machines it loads
// (docs/agent.md, "Loading a shard"). Each slot keeps its SOLD and BURNED
// token counts, kept by triggers in the transaction that moves a token, so
// a load reads two columns instead of counting the slot's whole history;
// existing slots are counted once here. Partial indexes lead the queries
// for POOL tokens, requested restocks and payments for unknown orders
// straight to their rows: each costs a write only when a row enters or
// leaves its set (a reservation takes its token out of the POOL index).
constexpr const char* kSchemaV9 = R"sql(
ALTER TABLE slots ADD COLUMN sold INTEGER NOT NULL DEFAULT 0;
ALTER TABLE slots ADD COLUMN burned INTEGER NOT NULL DEFAULT 0;
UPDATE slots SET
  sold = (SELECT count(*) FROM pool_tokens t
          WHERE t.device = slots.device AND t.slot = slots.slot AND t.state = 'SOLD'),
  burned = (SELECT count(*) FROM pool_tokens t
            WHERE t.device = slots.device AND t.slot = slots.slot AND t.state = 'BURNED');
CREATE TRIGGER pool_tokens_counted_insert AFTER INSERT ON pool_tokens
WHEN new.state = 'SOLD' OR new.state = 'BURNED'
BEGIN
  UPDATE slots SET sold = sold + (new.state = 'SOLD'), burned = burned + (new.state = 'BURNED')
  WHERE device = new.device AND slot = new.slot;
END;
CREATE TRIGGER pool_tokens_counted_update AFTER UPDATE OF state ON pool_tokens
WHEN new.state = 'SOLD' OR new.state = 'BURNED' OR old.state = 'SOLD' OR old.state = 'BURNED'
BEGIN
  UPDATE slots SET sold = sold + (new.state = 'SOLD') - (old.state = 'SOLD'),
                   burned = burned + (new.state = 'BURNED') - (old.state = 'BURNED')
  WHERE device = new.device AND slot = new.slot;
END;
CREATE TRIGGER pool_tokens_counted_delete AFTER DELETE ON pool_tokens
WHEN old.state = 'SOLD' OR old.state = 'BURNED'
BEGIN
  UPDATE slots SET sold = sold - (old.state = 'SOLD'), burned = burned - (old.state = 'BURNED')
  WHERE device = old.device AND slot = old.slot;
END;
CREATE INDEX pool_tokens_in_pool ON pool_tokens(device) WHERE state = 'POOL';
CREATE INDEX restocks_requested ON restocks(device) WHERE state = 'REQUESTED';
CREATE INDEX payments_of_unknown_orders ON payments(order_id)
  WHERE outcome = 'unknown_order_refunded';
)sql";

// v6: the state CHECKs as chains of comparisons. SQLite codes `x IN (...)`
// of three or more constants as an ephemeral index, built again each time
// the expression runs: every INSERT and UPDATE of an order, a token or a
// refund opened a B-tree and zeroed a page for its CHECK (an UPDATE of a
// token's state: 8.3 instead of 4.4 us; docs/design-decisions.md, "State
// CHECKs without IN lists"). The meaning is the same and every stored row
// satisfies both, so the stored table text is rewritten in place, by
// SQLite's documented procedure for changing a CHECK constraint
// (lang_altertable.html, "Making Other Kinds Of Table Schema Changes"):
// writable_schema on, the text replaced, schema_version + 1, in the
// migration's transaction. Each new text is parsed in a scratch database
// first, so a text SQLite would not read back is never stored.
struct CheckRewrite {
  const char* table;
  const char* from;  // as the earlier migrations wrote it
  std::vector<const char*> states;
};

std::string or_chain(const std::vector<const char*>& states) {
  std::string out = "CHECK(";
  for (size_t i = 0; i < states.size(); ++i) {
    out += (i == 0 ? "state = '" : " OR state = '") + std::string(states[i]) + "'";
  }
  return out + ")";
}

Result<int64_t> schema_version(sql::Database& db) {
  auto st = db.prepare("PRAGMA schema_version");
  if (!st.ok()) return st.error();
  auto row = st->step();
  if (!row.ok()) return row.error();
  if (!*row) return make_error("schema", "PRAGMA schema_version returned no row");
  return st->column_int64(0);
}

Status rewrite_state_checks(sql::Database& db) {
  static const std::vector<CheckRewrite> kRewrites = {
      {"pool_tokens",
       "CHECK(state IN ('POOL','RESERVED','DISPATCHED','SOLD','BURNED'))",
       {"POOL", "RESERVED", "DISPATCHED", "SOLD", "BURNED"}},
      {"orders",
       "CHECK(state IN ('RESERVED','PAID','DISPATCHED','COMPLETED','EXPIRED',\n"
       "                                      'CANCELLED','FAILED','REFUNDED','NEEDS_REVIEW'))",
       {"RESERVED", "PAID", "DISPATCHED", "COMPLETED", "EXPIRED", "CANCELLED", "FAILED", "REFUNDED",
        "NEEDS_REVIEW"}},
      {"refunds",
       "CHECK(state IN ('PENDING','DELIVERED','GAVE_UP'))",
       {"PENDING", "DELIVERED", "GAVE_UP"}},
  };
  auto scratch = sql::Database::open(":memory:");
  if (!scratch.ok()) return scratch.error();
  std::vector<std::pair<std::string, std::string>> updates;  // table -> new text
  for (const CheckRewrite& r : kRewrites) {
    auto st = db.prepare("SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = ?");
    if (!st.ok()) return st.error();
    st->bind(1, std::string(r.table));
    auto row = st->step();
    if (!row.ok()) return row.error();
    if (!*row) return make_error("schema", std::string("no table ") + r.table);
    std::string text = st->column_text(0);
    size_t at = text.find(r.from);
    if (at == std::string::npos) continue;  // written otherwise: left as it is
    text.replace(at, std::strlen(r.from), or_chain(r.states));
    if (auto s = scratch->exec(text); !s.ok()) return s;
    updates.emplace_back(r.table, std::move(text));
  }
  if (updates.empty()) return {};
  auto version = schema_version(db);
  if (!version.ok()) return version.error();
  if (auto s = db.exec("PRAGMA writable_schema = ON"); !s.ok()) return s;
  Status written;
  for (const auto& [table, text] : updates) {
    auto st = db.prepare("UPDATE sqlite_schema SET sql = ? WHERE type = 'table' AND name = ?");
    if (!st.ok()) {
      written = st.error();
      break;
    }
    st->bind(1, text).bind(2, table);
    if (auto done = st->step(); !done.ok()) {
      written = done.error();
      break;
    }
  }
  if (written.ok()) {
    written = db.exec("PRAGMA schema_version = " + std::to_string(*version + 1));
  }
  Status off = db.exec("PRAGMA writable_schema = OFF");
  return written.ok() ? off : written;
}

// v10: the mac of each device's last processed event, so that a duplicate
// seq with other content (a device ledger that went back in time) is told
// from a resend, and each ack names the event it covers up to.
constexpr const char* kSchemaV10 = R"sql(
ALTER TABLE device_seq ADD COLUMN last_mac TEXT NOT NULL DEFAULT '';
)sql";

// v11: the operators (docs/agent.md, "Accounts, roles and tokens"): named
// accounts with a role (a restocker's machines as comma-separated ids), API
// tokens kept as their SHA-256, and the audit trail, appended in the
// transaction of the action it records.
constexpr const char* kSchemaV11 = R"sql(
CREATE TABLE accounts(
  name TEXT PRIMARY KEY,
  role TEXT NOT NULL CHECK (role = 'viewer' OR role = 'restocker' OR role = 'support'
                            OR role = 'admin'),
  machines TEXT NOT NULL DEFAULT '',
  password_hash TEXT NOT NULL DEFAULT '',
  created_ms INTEGER NOT NULL,
  disabled_ms INTEGER NOT NULL DEFAULT 0);
CREATE TABLE api_tokens(
  id TEXT PRIMARY KEY,
  account TEXT NOT NULL REFERENCES accounts(name),
  sha256_hex TEXT NOT NULL UNIQUE,
  label TEXT NOT NULL DEFAULT '',
  created_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  revoked_ms INTEGER NOT NULL DEFAULT 0);
CREATE INDEX api_tokens_of_account ON api_tokens(account);
CREATE TABLE audit(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  at_ms INTEGER NOT NULL,
  account TEXT NOT NULL,
  action TEXT NOT NULL,
  device TEXT NOT NULL DEFAULT '',
  order_id TEXT NOT NULL DEFAULT '',
  detail TEXT NOT NULL DEFAULT '',
  peer TEXT NOT NULL DEFAULT '');
CREATE INDEX audit_by_account ON audit(account, id);
CREATE INDEX audit_by_device ON audit(device, id);
)sql";

const std::vector<sql::Migration>& migrations() {
  static const std::vector<sql::Migration> kAll = {
      {1, kSchemaV1},   {2, kSchemaV2},  {3, kSchemaV3},
      {4, kSchemaV4},   {5, kSchemaV5},  {6, "", rewrite_state_checks},
      {7, kSchemaV7},   {8, kSchemaV8},  {9, kSchemaV9},
      {10, kSchemaV10}, {11, kSchemaV11}};
  return kAll;
}

Order read_order(const sql::Statement& s) {
  Order o;
  o.id = s.column_text(0);
  o.device = s.column_text(1);
  o.slot = s.column_int(2);
  o.token = s.column_text(3);
  o.price_cents = s.column_int64(4);
  o.state = parse_order_state(s.column_text(5)).value_or(OrderState::kNeedsReview);
  o.created_ms = s.column_int64(6);
  o.updated_ms = s.column_int64(7);
  o.reserve_deadline_ms = s.column_int64(8);
  o.dispatch_expires_at_ms = s.column_int64(9);
  o.payment_id = s.column_text(10);
  o.reason = s.column_text(11);
  o.idempotency_key = s.column_text(12);
  o.client = s.column_text(13);
  return o;
}

void bind_optional(sql::Statement& stmt, int index, const std::string& value) {
  if (value.empty()) {
    stmt.bind_null(index);
  } else {
    stmt.bind(index, value);
  }
}

}  // namespace detail

}  // namespace vend::agent
