// The PostgreSQL schema: the same tables and meaning as SQLite's
// (cloud-agent/repository/repository_schema.cpp), in PostgreSQL's types.
#include "postgres/postgres_schema.hpp"

namespace vend::agent::pg {

namespace {

// Version 1 is the shape of SQLite's version 4: PostgreSQL counts its own
// versions from here. Integers are BIGINT (milliseconds, cents, and seqs as
// their 64-bit pattern, as in SQLite). pool_tokens.seq keeps mint order
// (SQLite's rowid). vend_expect_one() makes a conditional write that did
// not change exactly one row fail inside the server (SQLSTATE VD001,
// "conflict"), so the writes of a group can be pipelined without waiting
// for each row count.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE devices(
  id TEXT PRIMARY KEY,
  key_hex TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  next_key_hex TEXT NOT NULL DEFAULT '',
  decommissioned_ms BIGINT NOT NULL DEFAULT 0);
CREATE TABLE slots(
  device TEXT NOT NULL REFERENCES devices(id),
  slot INTEGER NOT NULL CHECK(slot BETWEEN 1 AND 255),
  product TEXT NOT NULL,
  price_cents BIGINT NOT NULL CHECK(price_cents >= 0),
  capacity INTEGER NOT NULL,
  PRIMARY KEY(device, slot));
CREATE TABLE pool_tokens(
  seq BIGINT GENERATED ALWAYS AS IDENTITY,
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
  updated_ms BIGINT NOT NULL,
  PRIMARY KEY(device, restock_id));
CREATE TABLE orders(
  id TEXT PRIMARY KEY,
  device TEXT NOT NULL,
  slot INTEGER NOT NULL,
  token TEXT NOT NULL,
  price_cents BIGINT NOT NULL,
  state TEXT NOT NULL CHECK(state IN ('RESERVED','PAID','DISPATCHED','COMPLETED','EXPIRED',
                                      'CANCELLED','FAILED','REFUNDED','NEEDS_REVIEW')),
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  reserve_deadline_ms BIGINT NOT NULL,
  dispatch_expires_at_ms BIGINT NOT NULL,
  payment_id TEXT UNIQUE,
  reason TEXT NOT NULL DEFAULT '',
  idempotency_key TEXT UNIQUE);
CREATE INDEX orders_by_state ON orders(state);
CREATE INDEX orders_by_updated ON orders(updated_ms);
CREATE TABLE payments(
  payment_id TEXT PRIMARY KEY,
  order_id TEXT NOT NULL,
  amount_cents BIGINT NOT NULL,
  outcome TEXT NOT NULL,
  at_ms BIGINT NOT NULL);
CREATE INDEX payments_by_order ON payments(order_id);
CREATE TABLE refunds(
  payment_id TEXT PRIMARY KEY,
  order_id TEXT NOT NULL,
  amount_cents BIGINT NOT NULL,
  reason TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  state TEXT NOT NULL DEFAULT 'PENDING' CHECK(state IN ('PENDING','DELIVERED','GAVE_UP')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  updated_ms BIGINT NOT NULL DEFAULT 0);
CREATE INDEX refunds_by_order ON refunds(order_id);
CREATE INDEX refunds_by_state ON refunds(state, updated_ms);
CREATE TABLE device_seq(
  device TEXT PRIMARY KEY,
  last_processed_seq BIGINT NOT NULL,
  ledger_id TEXT NOT NULL DEFAULT '');
CREATE TABLE retired_ledgers(
  device TEXT NOT NULL,
  ledger_id TEXT NOT NULL,
  last_processed_seq BIGINT NOT NULL,
  retired_ms BIGINT NOT NULL,
  PRIMARY KEY(device, ledger_id));
CREATE TABLE snapshots(
  device TEXT PRIMARY KEY,
  payload TEXT NOT NULL,
  at_ms BIGINT NOT NULL);
CREATE TABLE reconcile_reports(
  device TEXT PRIMARY KEY,
  report TEXT NOT NULL,
  at_ms BIGINT NOT NULL);
CREATE TABLE faults(
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  device TEXT NOT NULL,
  code TEXT NOT NULL,
  message TEXT NOT NULL,
  slot INTEGER NOT NULL,
  at_ms BIGINT NOT NULL);
CREATE INDEX faults_by_device ON faults(device, id);
CREATE TABLE order_events(
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  order_id TEXT NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  detail TEXT NOT NULL DEFAULT '');
CREATE INDEX order_events_by_order ON order_events(order_id);
CREATE FUNCTION vend_expect_one(changed BIGINT, what TEXT) RETURNS VOID
LANGUAGE plpgsql AS $$
BEGIN
  IF changed <> 1 THEN
    RAISE EXCEPTION USING ERRCODE = 'VD001',
      MESSAGE = what || ': ' || changed || ' rows changed, 1 expected';
  END IF;
END $$;
)sql";

// Version 2: the write fence of several agents (docs/design-decisions.md,
// "The fence, built"). vend_fence() checks that each claim (instance,
// shard, epoch) is the shard's current, unexpired lease in the lease store's
// table (cloud-agent/cluster/pg_lease_store.cpp creates it; plpgsql resolves
// the table only when called, so a database without it fails the call with
// 42P01). clock_timestamp(), not now(): now() is the transaction's start.
// With `hold` it first locks the claimed lease rows FOR SHARE, in shard
// order, so a takeover's UPDATE waits for this transaction to end. Refused
// claims raise SQLSTATE VD002 ("fenced"): the message names the first one,
// the DETAIL lists the 1-based positions of all of them.
constexpr const char* kSchemaV2 = R"sql(
CREATE FUNCTION vend_fence(instances TEXT[], shards INTEGER[], epochs BIGINT[], hold BOOLEAN)
RETURNS VOID LANGUAGE plpgsql AS $$
DECLARE
  c RECORD;
  refused TEXT := '';
  first TEXT;
BEGIN
  IF hold THEN
    PERFORM 1 FROM vend_shard_leases WHERE shard = ANY(shards) ORDER BY shard FOR SHARE;
  END IF;
  FOR c IN SELECT x.n, x.instance, x.shard, x.epoch, l.owner, l.epoch AS held,
                  l.expires_at > clock_timestamp() AS live
           FROM unnest(instances, shards, epochs) WITH ORDINALITY AS x(instance, shard, epoch, n)
           LEFT JOIN vend_shard_leases l ON l.shard = x.shard ORDER BY x.n LOOP
    CONTINUE WHEN c.owner = c.instance AND c.held = c.epoch AND c.live;
    refused := refused || CASE WHEN refused = '' THEN '' ELSE ',' END || c.n;
    IF first IS NULL THEN
      first := format('write fenced: shard %s is not held by %s at epoch %s (its lease: %s at '
                      'epoch %s, %s)', c.shard, c.instance, c.epoch,
                      coalesce(nullif(c.owner, ''), 'nobody'), coalesce(c.held, 0),
                      CASE WHEN c.live THEN 'unexpired' ELSE 'expired' END);
    END IF;
  END LOOP;
  IF refused <> '' THEN
    RAISE EXCEPTION USING ERRCODE = 'VD002', MESSAGE = first, DETAIL = refused;
  END IF;
END $$;
)sql";

// v3: who reserved each order (Order::client; SQLite's v7).
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE orders ADD COLUMN client TEXT NOT NULL DEFAULT '';
)sql";

// v4: each refund's machine (StoredRefund::device; SQLite's v8).
constexpr const char* kSchemaV4 = R"sql(
ALTER TABLE refunds ADD COLUMN device TEXT NOT NULL DEFAULT '';
)sql";

// v5: what a load reads, bounded by the live rows of the machines it loads
// (SQLite's v9; docs/agent.md, "Loading a shard"): each slot's SOLD and
// BURNED counts, kept by a trigger in the transaction that moves a token
// (existing slots counted once here), and partial indexes for the POOL
// tokens (in mint order per machine), the requested restocks and the
// payments for unknown orders.
constexpr const char* kSchemaV5 = R"sql(
ALTER TABLE slots ADD COLUMN sold BIGINT NOT NULL DEFAULT 0,
                  ADD COLUMN burned BIGINT NOT NULL DEFAULT 0;
UPDATE slots s SET sold = c.sold, burned = c.burned
FROM (SELECT device, slot, count(*) FILTER (WHERE state = 'SOLD') AS sold,
             count(*) FILTER (WHERE state = 'BURNED') AS burned
      FROM pool_tokens GROUP BY device, slot) c
WHERE c.device = s.device AND c.slot = s.slot;
CREATE FUNCTION vend_count_tokens() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND OLD.state IN ('SOLD', 'BURNED') THEN
    UPDATE slots SET sold = sold - (OLD.state = 'SOLD')::int,
                     burned = burned - (OLD.state = 'BURNED')::int
    WHERE device = OLD.device AND slot = OLD.slot;
  END IF;
  IF TG_OP <> 'DELETE' AND NEW.state IN ('SOLD', 'BURNED') THEN
    UPDATE slots SET sold = sold + (NEW.state = 'SOLD')::int,
                     burned = burned + (NEW.state = 'BURNED')::int
    WHERE device = NEW.device AND slot = NEW.slot;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER pool_tokens_counted_insert AFTER INSERT ON pool_tokens FOR EACH ROW
  WHEN (NEW.state IN ('SOLD', 'BURNED')) EXECUTE FUNCTION vend_count_tokens();
CREATE TRIGGER pool_tokens_counted_update AFTER UPDATE OF state ON pool_tokens FOR EACH ROW
  WHEN (OLD.state IS DISTINCT FROM NEW.state
        AND (OLD.state IN ('SOLD', 'BURNED') OR NEW.state IN ('SOLD', 'BURNED')))
  EXECUTE FUNCTION vend_count_tokens();
CREATE TRIGGER pool_tokens_counted_delete AFTER DELETE ON pool_tokens FOR EACH ROW
  WHEN (OLD.state IN ('SOLD', 'BURNED')) EXECUTE FUNCTION vend_count_tokens();
CREATE INDEX pool_tokens_in_pool ON pool_tokens(device, seq) WHERE state = 'POOL';
CREATE INDEX restocks_requested ON restocks(device) WHERE state = 'REQUESTED';
CREATE INDEX payments_of_unknown_orders ON payments(order_id)
  WHERE outcome = 'unknown_order_refunded';
)sql";

// v6: the mac of each device's last processed event (SQLite's v10).
constexpr const char* kSchemaV6 = R"sql(
ALTER TABLE device_seq ADD COLUMN last_mac TEXT NOT NULL DEFAULT '';
)sql";

// v7: the operators' accounts, API tokens and audit trail (SQLite's v11).
constexpr const char* kSchemaV7 = R"sql(
CREATE TABLE accounts(
  name TEXT PRIMARY KEY,
  role TEXT NOT NULL CHECK (role IN ('viewer', 'restocker', 'support', 'admin')),
  machines TEXT NOT NULL DEFAULT '',
  password_hash TEXT NOT NULL DEFAULT '',
  created_ms BIGINT NOT NULL,
  disabled_ms BIGINT NOT NULL DEFAULT 0);
CREATE TABLE api_tokens(
  id TEXT PRIMARY KEY,
  account TEXT NOT NULL REFERENCES accounts(name),
  sha256_hex TEXT NOT NULL UNIQUE,
  label TEXT NOT NULL DEFAULT '',
  created_ms BIGINT NOT NULL,
  expires_ms BIGINT NOT NULL,
  revoked_ms BIGINT NOT NULL DEFAULT 0);
CREATE INDEX api_tokens_of_account ON api_tokens(account);
CREATE TABLE audit(
  id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at_ms BIGINT NOT NULL,
  account TEXT NOT NULL,
  action TEXT NOT NULL,
  device TEXT NOT NULL DEFAULT '',
  order_id TEXT NOT NULL DEFAULT '',
  detail TEXT NOT NULL DEFAULT '',
  peer TEXT NOT NULL DEFAULT '');
CREATE INDEX audit_by_account ON audit(account, id);
CREATE INDEX audit_by_device ON audit(device, id);
)sql";

struct Migration {
  int version;
  const char* sql;
};
const Migration kMigrations[] = {{1, kSchemaV1}, {2, kSchemaV2}, {3, kSchemaV3}, {4, kSchemaV4},
                                 {5, kSchemaV5}, {6, kSchemaV6}, {7, kSchemaV7}};
constexpr int kLatest = 7;
// pg_advisory_xact_lock key of the migration ("vend" in ASCII).
constexpr const char* kMigrationLock = "SELECT pg_advisory_xact_lock(1986356836)";

}  // namespace

Status migrate(PgConnection& conn) {
  if (auto r = conn.exec("BEGIN"); !r.ok()) return r.error();
  auto step = [&]() -> Status {
    if (auto r = conn.exec(kMigrationLock); !r.ok()) return r.error();
    auto r = conn.exec(
        "CREATE TABLE IF NOT EXISTS vend_schema_version(version INTEGER NOT NULL);"
        "SELECT COALESCE(max(version), 0) FROM vend_schema_version");
    if (!r.ok()) return r.error();
    int version = r->int32(0, 0);
    if (version > kLatest) {
      return make_error("schema_version", "the PostgreSQL database's schema is version " +
                                              std::to_string(version) + ", newer than this " +
                                              "agent's " + std::to_string(kLatest) +
                                              ": run a newer vend-agent");
    }
    for (const auto& m : kMigrations) {
      if (m.version <= version) continue;
      if (auto a = conn.exec(m.sql); !a.ok()) return a.error();
      auto bump = conn.exec(
          "DELETE FROM vend_schema_version; INSERT INTO vend_schema_version "
          "VALUES(" +
          std::to_string(m.version) + ")");
      if (!bump.ok()) return bump.error();
    }
    return {};
  };
  Status s = step();
  auto end = conn.exec(s.ok() ? "COMMIT" : "ROLLBACK");
  if (s.ok() && !end.ok()) return end.error();
  return s;
}

namespace {

// $-numbered parameters in text format; the comments say which change
// (repository_types.hpp) uses each. A table, not code: write_statements().
constexpr NamedStatement kWriteStatements[] = {
    // The fence's check before a fenced changeset's changes (no lock: see
    // postgres_group.cpp); $1..$3 as vend_fence()'s arrays.
    {"fence_check", "SELECT vend_fence($1::text[], $2::integer[], $3::bigint[], false)"},
    {"insert_device", "INSERT INTO devices(id, key_hex, created_ms) VALUES($1, $2, $3)"},
    {"insert_device_seq", "INSERT INTO device_seq(device, last_processed_seq) VALUES($1, 0)"},
    {"upsert_slot",
     // A new slot counts the tokens it already has (the trigger of
     // schema v5 counts the ones that move from now on).
     "INSERT INTO slots(device, slot, product, price_cents, capacity, sold, burned) "
     "SELECT $1::text, $2::integer, $3::text, $4::bigint, $5::integer, "
     "count(*) FILTER (WHERE state = 'SOLD'), "
     "count(*) FILTER (WHERE state = 'BURNED') FROM pool_tokens "
     "WHERE device = $1 AND slot = $2 ON CONFLICT(device, slot) DO UPDATE SET "
     "product = excluded.product, price_cents = excluded.price_cents, "
     "capacity = excluded.capacity"},
    {"insert_order",
     "INSERT INTO orders(id, device, slot, token, price_cents, state, created_ms, updated_ms, "
     "reserve_deadline_ms, dispatch_expires_at_ms, payment_id, reason, idempotency_key, client) "
     "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"},
    {"insert_order_event",
     "INSERT INTO order_events(order_id, from_state, to_state, at_ms, detail) "
     "VALUES($1, $2, $3, $4, $5)"},
    {"transition_order",
     "WITH u AS (UPDATE orders SET state = $1, updated_ms = $2, dispatch_expires_at_ms = $3, "
     "payment_id = $4, reason = $5 WHERE id = $6 AND state = $7 RETURNING 1) "
     "SELECT vend_expect_one((SELECT count(*) FROM u), $8)"},
    {"move_token",
     "WITH u AS (UPDATE pool_tokens SET state = $1, order_id = $2 WHERE token = $3 AND "
     "state = $4 RETURNING 1) SELECT vend_expect_one((SELECT count(*) FROM u), $5)"},
    // One multi-row INSERT per changeset: $1 is a text[] of tokens, in mint order.
    {"insert_pool_tokens",
     "INSERT INTO pool_tokens(token, device, slot, restock_id, state, order_id) "
     "SELECT t, $2::text, $3::integer, $4::text, 'POOL', NULL FROM unnest($1::text[]) WITH "
     "ORDINALITY AS x(t, n) "
     "ORDER BY n"},
    {"put_restock",
     "INSERT INTO restocks(restock_id, device, slot, count, state, updated_ms) "
     "VALUES($1, $2, $3, $4, $5, $6) ON CONFLICT(device, restock_id) DO UPDATE SET "
     "count = excluded.count, state = excluded.state, updated_ms = excluded.updated_ms"},
    {"insert_payment",
     "INSERT INTO payments(payment_id, order_id, amount_cents, outcome, at_ms) "
     "VALUES($1, $2, $3, $4, $5)"},
    {"insert_refund",
     "INSERT INTO refunds(payment_id, order_id, amount_cents, reason, at_ms, state, attempts, "
     "last_error, updated_ms, device) VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"},
    {"update_refund",
     "WITH u AS (UPDATE refunds SET state = $1, attempts = $2, last_error = $3, updated_ms = $4 "
     "WHERE payment_id = $5 AND state = 'PENDING' RETURNING 1) "
     "SELECT vend_expect_one((SELECT count(*) FROM u), $6)"},
    {"advance_device_seq",
     "WITH u AS (UPDATE device_seq SET last_processed_seq = $1, last_mac = $2 WHERE device = $3 "
     "AND last_processed_seq = $4 RETURNING 1) "
     "SELECT vend_expect_one((SELECT count(*) FROM u), $5)"},
    {"retire_ledger",
     "INSERT INTO retired_ledgers(device, ledger_id, last_processed_seq, retired_ms) "
     "VALUES($1, $2, $3, $4) ON CONFLICT DO NOTHING"},
    {"switch_ledger",
     "WITH u AS (UPDATE device_seq SET ledger_id = $1, last_processed_seq = 0, last_mac = '' "
     "WHERE device = $2 "
     "AND ledger_id = $3 AND last_processed_seq = $4 RETURNING 1) "
     "SELECT vend_expect_one((SELECT count(*) FROM u), $5)"},
    {"set_next_key",
     "WITH u AS (UPDATE devices SET next_key_hex = $1 WHERE id = $2 RETURNING 1) "
     "SELECT vend_expect_one((SELECT count(*) FROM u), $3)"},
    {"promote_next_key",
     "WITH u AS (UPDATE devices SET key_hex = next_key_hex, next_key_hex = '' WHERE id = $1 "
     "AND next_key_hex = $2 RETURNING 1) SELECT vend_expect_one((SELECT count(*) FROM u), $3)"},
    {"decommission_device",
     "WITH u AS (UPDATE devices SET decommissioned_ms = $1, next_key_hex = '' WHERE id = $2 "
     "AND decommissioned_ms = 0 RETURNING 1) "
     "SELECT vend_expect_one((SELECT count(*) FROM u), $3)"},
    {"put_snapshot",
     "INSERT INTO snapshots(device, payload, at_ms) VALUES($1, $2, $3) ON CONFLICT(device) "
     "DO UPDATE SET payload = excluded.payload, at_ms = excluded.at_ms"},
    {"put_reconcile_report",
     "INSERT INTO reconcile_reports(device, report, at_ms) VALUES($1, $2, $3) "
     "ON CONFLICT(device) DO UPDATE SET report = excluded.report, at_ms = excluded.at_ms"},
    // Appends a fault and trims the table to $6 rows (the CTE's DELETE does
    // not see the new row, whose id is above the cut anyway).
    {"insert_fault",
     "WITH ins AS (INSERT INTO faults(device, code, message, slot, at_ms) "
     "VALUES($1, $2, $3, $4, $5) RETURNING id) "
     "DELETE FROM faults WHERE id <= (SELECT id FROM ins) - $6"},
    {"put_account",
     "INSERT INTO accounts(name, role, machines, password_hash, created_ms, disabled_ms) "
     "VALUES($1, $2, $3, $4, $5, $6) ON CONFLICT(name) DO UPDATE SET role = excluded.role, "
     "machines = excluded.machines, password_hash = excluded.password_hash, "
     "disabled_ms = excluded.disabled_ms"},
    {"insert_api_token",
     "INSERT INTO api_tokens(id, account, sha256_hex, label, created_ms, expires_ms) "
     "VALUES($1, $2, $3, $4, $5, $6)"},
    {"revoke_api_token",
     "WITH u AS (UPDATE api_tokens SET revoked_ms = $1 WHERE id = $2 AND revoked_ms = 0 "
     "RETURNING 1) SELECT vend_expect_one((SELECT count(*) FROM u), $3)"},
    {"insert_audit",
     "INSERT INTO audit(at_ms, account, action, device, order_id, detail, peer) "
     "VALUES($1, $2, $3, $4, $5, $6, $7)"},
};

}  // namespace

std::span<const NamedStatement> write_statements() { return kWriteStatements; }

Status prepare_statements(PgConnection& conn) {
  for (const auto& s : write_statements()) {
    if (auto p = conn.prepare(s.name, s.sql); !p.ok()) return p;
  }
  return {};
}

}  // namespace vend::agent::pg
