#include "fleet_scale_seed.hpp"

#include <algorithm>
#include <cstdio>

#include "vend/crypto.hpp"

namespace vend::bench {

namespace {

constexpr int kRowsPerFinishedOrder = 5;  // order, token, payment, 2 events
constexpr const char* kKeySalt = "vend-bench-key:";
constexpr int64_t kRowsPerChunk = 250'000;

std::string machines_sql(const SeedSpec& s) {
  const std::string id = "'" + s.prefix + "-' || lpad(i::text, 6, '0')";
  return "INSERT INTO devices(id, key_hex, created_ms) SELECT " + id +
         ", encode(sha256(convert_to('" + kKeySalt + "' || " + id +
         ", 'UTF8')), 'hex'), 1 FROM generate_series(1, " + std::to_string(s.machines) +
         ") i;"
         "INSERT INTO device_seq(device, last_processed_seq) SELECT id, 0 FROM devices;"
         "INSERT INTO slots(device, slot, product, price_cents, capacity) SELECT d.id, s, "
         "'product-' || s, 100, " +
         std::to_string(s.capacity) + " FROM devices d, generate_series(1, " +
         std::to_string(s.slots) + ") s;";
}

// Finished orders 1..per_machine of every machine; one in ten failed at the
// machine with its token BURNED, the others COMPLETED with it SOLD.
std::string history_sql(int64_t per_machine, int slots, const std::string& first_id,
                        const std::string& last_id) {
  const std::string from = " FROM generate_series(1, " + std::to_string(per_machine) +
                           ") i, devices d WHERE d.id BETWEEN '" + first_id + "' AND '" + last_id +
                           "'";
  const std::string id = "d.id || '-' || i";
  const std::string slot = "1 + i % " + std::to_string(slots);
  return "INSERT INTO pool_tokens(token, device, slot, restock_id, state, order_id) SELECT "
         "'h-' || " +
         id + ", d.id, " + slot +
         ", 'hist', CASE WHEN i % 10 = 0 THEN 'BURNED' ELSE 'SOLD' END, 'ho-' || " + id + from +
         ";"
         "INSERT INTO orders(id, device, slot, token, price_cents, state, created_ms, "
         "updated_ms, reserve_deadline_ms, dispatch_expires_at_ms, payment_id, reason) SELECT "
         "'ho-' || " +
         id + ", d.id, " + slot + ", 'h-' || " + id +
         ", 100, CASE WHEN i % 10 = 0 THEN 'FAILED' ELSE 'COMPLETED' END, i, i, i, i, 'hp-' || " +
         id + ", CASE WHEN i % 10 = 0 THEN 'jam' ELSE '' END" + from +
         ";"
         "INSERT INTO payments(payment_id, order_id, amount_cents, outcome, at_ms) SELECT "
         "'hp-' || " +
         id + ", 'ho-' || " + id + ", 100, 'applied', i" + from +
         ";"
         "INSERT INTO order_events(order_id, from_state, to_state, at_ms, detail) SELECT 'ho-' "
         "|| " +
         id + ", 'RESERVED', 'PAID', i, ''" + from +
         ";"
         "INSERT INTO order_events(order_id, from_state, to_state, at_ms, detail) SELECT 'ho-' "
         "|| " +
         id + ", 'DISPATCHED', CASE WHEN i % 10 = 0 THEN 'FAILED' ELSE 'COMPLETED' END, i, ''" +
         from + ";";
}

}  // namespace

std::string scale_machine_id(const std::string& prefix, int index) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "-%06d", index);
  return prefix + buf;
}

std::string scale_machine_key_hex(const std::string& id) {
  return crypto::sha256_hex(std::string(kKeySalt) + id);
}

int64_t seed_fleet(test::PostgresServer& pg, const std::string& db, const SeedSpec& spec) {
  int64_t per_machine = spec.history_rows / kRowsPerFinishedOrder / std::max(1, spec.machines);
  pg.sql(db, "ALTER TABLE pool_tokens DISABLE TRIGGER USER;" + machines_sql(spec));
  // The history in chunks of machines: one psql call may take 120 s at most
  // (test::PostgresServer).
  int chunk = static_cast<int>(std::max<int64_t>(
      1, kRowsPerChunk / std::max<int64_t>(1, per_machine * kRowsPerFinishedOrder)));
  for (int first = 1; per_machine > 0 && first <= spec.machines; first += chunk) {
    int last = std::min(spec.machines, first + chunk - 1);
    pg.sql(db, history_sql(per_machine, spec.slots, scale_machine_id(spec.prefix, first),
                           scale_machine_id(spec.prefix, last)));
  }
  std::string sql =
      "ALTER TABLE pool_tokens ENABLE TRIGGER USER;"
      "UPDATE slots s SET sold = c.sold, burned = c.burned FROM (SELECT device, slot, "
      "count(*) FILTER (WHERE state = 'SOLD') AS sold, count(*) FILTER (WHERE state = "
      "'BURNED') AS burned FROM pool_tokens GROUP BY device, slot) c WHERE c.device = "
      "s.device AND c.slot = s.slot; ANALYZE;";
  pg.sql(db, sql);
  return per_machine * kRowsPerFinishedOrder * spec.machines;
}

}  // namespace vend::bench
