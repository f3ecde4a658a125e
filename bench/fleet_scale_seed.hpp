// The fleet of bench_fleet_scale written straight into PostgreSQL with
// set-based SQL (generate_series, one statement per table), into a database
// whose schema vend-agent has already created: the machines as provisioning
// writes them (devices, device_seq, slots) and their history (finished
// orders with their SOLD or BURNED token, payment and two events).
#pragma once

#include <cstdint>
#include <string>

#include "test_support.hpp"

namespace vend::bench {

// "<prefix>-000001" for index 1.
std::string scale_machine_id(const std::string& prefix, int index);
// The machine's HMAC key (64 hex chars), derived from its id: the SQL seed
// computes the same with PostgreSQL's sha256().
std::string scale_machine_key_hex(const std::string& id);

struct SeedSpec {
  std::string prefix;
  int machines = 0;
  int slots = 8;
  int capacity = 100;
  int64_t history_rows = 0;  // about: 5 rows per finished order, spread over the machines
};

// Writes the machines and their history into `db`, counts each slot's SOLD
// and BURNED tokens (the counting trigger is off during the bulk insert, as
// a migration does) and runs ANALYZE (autovacuum's job on a live database).
// Returns the history rows written. Throws when a statement fails.
int64_t seed_fleet(test::PostgresServer& pg, const std::string& db, const SeedSpec& spec);

}  // namespace vend::bench
