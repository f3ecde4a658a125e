// The ledger's schema, as user_version migrations. Append; never edit a
// migration that has shipped.
#pragma once

#include <vector>

#include "vend/sqlite.hpp"

namespace vend::fw {

// Version 1: slots, tokens, restocks, dispenses and the outbox.
inline constexpr const char* kLedgerSchemaV1 = R"sql(
CREATE TABLE meta(
  key   TEXT PRIMARY KEY,
  value INTEGER NOT NULL
);
INSERT INTO meta(key, value) VALUES ('last_seq', 0), ('acked_seq', 0);

CREATE TABLE slots(
  slot           INTEGER PRIMARY KEY CHECK (slot BETWEEN 1 AND 255),
  product        TEXT NOT NULL DEFAULT '',
  capacity       INTEGER NOT NULL CHECK (capacity > 0),
  physical_count INTEGER NOT NULL DEFAULT 0 CHECK (physical_count >= 0)
);

-- One token per physical item; `position` orders a slot's queue.
CREATE TABLE tokens(
  token      TEXT PRIMARY KEY,
  slot       INTEGER NOT NULL REFERENCES slots(slot),
  state      TEXT NOT NULL CHECK (state IN ('AVAILABLE', 'CONSUMED', 'BURNED')),
  order_id   TEXT,
  restock_id TEXT NOT NULL,
  position   INTEGER NOT NULL,
  minted_ms  INTEGER NOT NULL
);
CREATE INDEX tokens_by_slot_state ON tokens(slot, state, position);

CREATE TABLE restocks(
  restock_id   TEXT PRIMARY KEY,
  slot         INTEGER NOT NULL REFERENCES slots(slot),
  count        INTEGER NOT NULL CHECK (count > 0),
  state        TEXT NOT NULL CHECK (state IN ('PENDING', 'CONFIRMED')),
  created_ms   INTEGER NOT NULL,
  confirmed_ms INTEGER
);

-- One row per authenticated dispense command, keyed by order: the dedup key.
CREATE TABLE dispenses(
  order_id       TEXT PRIMARY KEY,
  slot           INTEGER NOT NULL,
  token          TEXT NOT NULL,
  state          TEXT NOT NULL CHECK (state IN ('ACCEPTED', 'MOTOR_RUNNING', 'DISPENSED',
                                                'FAILED', 'REJECTED', 'UNCERTAIN')),
  reason         TEXT NOT NULL DEFAULT '',
  expires_at_ms  INTEGER NOT NULL,
  token_consumed INTEGER NOT NULL CHECK (token_consumed IN (0, 1)),
  accepted_ms    INTEGER NOT NULL,
  updated_ms     INTEGER NOT NULL
);
-- The database itself refuses to spend one token on two dispenses.
CREATE UNIQUE INDEX dispenses_token_spent ON dispenses(token) WHERE token_consumed = 1;
CREATE INDEX dispenses_by_state ON dispenses(state);

-- Events for the cloud, kept until its cumulative ack covers them.
CREATE TABLE outbox(
  seq        INTEGER PRIMARY KEY,
  type       TEXT NOT NULL,
  payload    TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);
)sql";

// Version 2: the ledger's identity (see Identity::ledger_id), one row,
// written by Ledger::open on first use.
inline constexpr const char* kLedgerSchemaV2 = R"sql(
CREATE TABLE ledger_identity(
  one       INTEGER PRIMARY KEY CHECK (one = 1),
  ledger_id TEXT NOT NULL
);
)sql";

// Version 3: the ids this file had before (Ledger::start_new_ledger): a
// command naming one of them comes from a cloud that has not yet seen this
// file's current ledger, not from one that has seen more than it.
inline constexpr const char* kLedgerSchemaV3 = R"sql(
CREATE TABLE previous_ledgers(
  ledger_id TEXT PRIMARY KEY
);
)sql";

inline const std::vector<sql::Migration>& ledger_migrations() {
  static const std::vector<sql::Migration> kMigrations = {
      {1, kLedgerSchemaV1}, {2, kLedgerSchemaV2}, {3, kLedgerSchemaV3}};
  return kMigrations;
}

}  // namespace vend::fw
