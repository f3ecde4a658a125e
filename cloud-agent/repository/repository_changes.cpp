// Repository: SQLite's SQL for every change the agent core makes.
#include <utility>

#include "repository/repository_schema.hpp"
#include "repository/repository_sqlite.hpp"

namespace vend::agent::detail {

namespace {

// Runs one statement. With expect >= 0, any other number of changed rows is
// a "conflict" naming `what`: the caller's memory disagrees with the log.
template <typename Bind>
Status run(SqliteWriter& w, const std::string& sql, Bind&& bind, int expect = -1,
           const std::string& what = "") {
  auto stmt = w.statement(sql);
  if (!stmt.ok()) return stmt.error();
  bind(**stmt);
  auto changed = (*stmt)->run();
  if (!changed.ok()) return changed.error();
  if (expect >= 0 && *changed != expect) {
    return make_error("conflict", what + ": " + std::to_string(*changed) + " rows changed, " +
                                      std::to_string(expect) + " expected");
  }
  return {};
}

Status insert_order_event(SqliteWriter& w, const std::string& order_id, const std::string& from,
                          const std::string& to, int64_t at_ms, const std::string& detail) {
  return run(w,
             "INSERT INTO order_events(order_id, from_state, to_state, at_ms, detail) "
             "VALUES(?, ?, ?, ?, ?)",
             [&](sql::Statement& s) {
               s.bind(1, order_id).bind(2, from).bind(3, to).bind(4, at_ms).bind(5, detail);
             });
}

// One operator() per change record (repository_types.hpp).
struct SqliteApply {
  SqliteWriter& w;
  const Change& change;

  std::string what() const { return describe_conflict(change); }

  Status operator()(const change::InsertDevice& c) const {
    auto s =
        run(w, "INSERT INTO devices(id, key_hex, created_ms) VALUES(?, ?, ?)",
            [&](sql::Statement& st) { st.bind(1, c.id).bind(2, c.key_hex).bind(3, c.created_ms); });
    if (!s.ok()) return s;
    return run(w, "INSERT INTO device_seq(device, last_processed_seq) VALUES(?, 0)",
               [&](sql::Statement& st) { st.bind(1, c.id); });
  }

  Status operator()(const change::UpsertSlot& c) const {
    return run(w,
               // A new slot counts the tokens it already has (the triggers
               // of schema v9 count the ones that move from now on).
               "INSERT INTO slots(device, slot, product, price_cents, capacity, sold, burned) "
               "VALUES(?1, ?2, ?3, ?4, ?5, "
               "(SELECT count(*) FROM pool_tokens WHERE device = ?1 AND slot = ?2 "
               "AND state = 'SOLD'), "
               "(SELECT count(*) FROM pool_tokens WHERE device = ?1 AND slot = ?2 "
               "AND state = 'BURNED')) ON CONFLICT(device, slot) DO UPDATE SET "
               "product = excluded.product, price_cents = excluded.price_cents, "
               "capacity = excluded.capacity",
               [&](sql::Statement& s) {
                 s.bind(1, c.device).bind(2, c.slot.slot).bind(3, c.slot.product);
                 s.bind(4, c.slot.price_cents).bind(5, c.slot.capacity);
               });
  }

  Status operator()(const change::InsertOrder& c) const {
    static const std::string kInsert = std::string("INSERT INTO orders(") + kOrderColumns +
                                       ") VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    const Order& order = c.order;
    auto s = run(w, kInsert, [&](sql::Statement& st) {
      st.bind(1, order.id).bind(2, order.device).bind(3, order.slot);
      st.bind(4, order.token).bind(5, order.price_cents);
      st.bind(6, to_string(order.state)).bind(7, order.created_ms);
      st.bind(8, order.updated_ms).bind(9, order.reserve_deadline_ms);
      st.bind(10, order.dispatch_expires_at_ms);
      bind_optional(st, 11, order.payment_id);
      st.bind(12, order.reason);
      bind_optional(st, 13, order.idempotency_key);
      st.bind(14, order.client);
    });
    return s;  // no creation event: Repository::order_events() derives it
  }

  Status operator()(const change::TransitionOrder& c) const {
    const Order& after = c.after;
    auto s = run(
        w,
        "UPDATE orders SET state = ?, updated_ms = ?, dispatch_expires_at_ms = ?, "
        "payment_id = ?, reason = ? WHERE id = ? AND state = ?",
        [&](sql::Statement& st) {
          st.bind(1, to_string(after.state)).bind(2, after.updated_ms);
          st.bind(3, after.dispatch_expires_at_ms);
          bind_optional(st, 4, after.payment_id);
          st.bind(5, after.reason).bind(6, after.id).bind(7, to_string(c.from));
        },
        1, what());
    if (!s.ok()) return s;
    return insert_order_event(w, after.id, to_string(c.from), to_string(after.state),
                              after.updated_ms, c.detail);
  }

  Status operator()(const change::MoveToken& c) const {
    return run(
        w, "UPDATE pool_tokens SET state = ?, order_id = ? WHERE token = ? AND state = ?",
        [&](sql::Statement& s) {
          s.bind(1, to_string(c.to));
          bind_optional(s, 2, c.order_id);
          s.bind(3, c.token).bind(4, to_string(c.from));
        },
        1, what());
  }

  Status operator()(const change::InsertPoolTokens& c) const {
    for (const auto& token : c.tokens) {
      auto s = run(w,
                   "INSERT INTO pool_tokens(token, device, slot, restock_id, state, order_id) "
                   "VALUES(?, ?, ?, ?, 'POOL', NULL)",
                   [&](sql::Statement& st) {
                     st.bind(1, token).bind(2, c.device).bind(3, c.slot).bind(4, c.restock_id);
                   });
      if (!s.ok()) return s;
    }
    return {};
  }

  Status operator()(const change::PutRestock& c) const {
    const StoredRestock& r = c.restock;
    return run(w,
               "INSERT INTO restocks(restock_id, device, slot, count, state, updated_ms) "
               "VALUES(?, ?, ?, ?, ?, ?) ON CONFLICT(device, restock_id) DO UPDATE SET "
               "count = excluded.count, state = excluded.state, updated_ms = excluded.updated_ms",
               [&](sql::Statement& s) {
                 s.bind(1, r.restock_id).bind(2, r.device).bind(3, r.slot);
                 s.bind(4, r.count).bind(5, r.minted ? "MINTED" : "REQUESTED");
                 s.bind(6, c.at_ms);
               });
  }

  Status operator()(const change::InsertPayment& c) const {
    const StoredPayment& p = c.payment;
    return run(w,
               "INSERT INTO payments(payment_id, order_id, amount_cents, outcome, at_ms) "
               "VALUES(?, ?, ?, ?, ?)",
               [&](sql::Statement& s) {
                 s.bind(1, p.payment_id).bind(2, p.order_id).bind(3, p.amount_cents);
                 s.bind(4, p.outcome).bind(5, p.at_ms);
               });
  }

  Status operator()(const change::InsertRefund& c) const {
    const StoredRefund& r = c.refund;
    return run(w,
               "INSERT INTO refunds(payment_id, order_id, amount_cents, reason, at_ms, state, "
               "attempts, last_error, updated_ms, device) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
               [&](sql::Statement& s) {
                 s.bind(1, r.payment_id).bind(2, r.order_id).bind(3, r.amount_cents);
                 s.bind(4, r.reason).bind(5, r.at_ms).bind(6, to_string(r.state));
                 s.bind(7, r.attempts).bind(8, r.last_error).bind(9, r.at_ms).bind(10, r.device);
               });
  }

  Status operator()(const change::UpdateRefund& c) const {
    return run(
        w,
        "UPDATE refunds SET state = ?, attempts = ?, last_error = ?, updated_ms = ? "
        "WHERE payment_id = ? AND state = 'PENDING'",
        [&](sql::Statement& s) {
          s.bind(1, to_string(c.state)).bind(2, c.attempts).bind(3, c.last_error);
          s.bind(4, c.at_ms).bind(5, c.payment_id);
        },
        1, what());
  }

  Status operator()(const change::AdvanceDeviceSeq& c) const {
    // Seqs are stored as their 64-bit pattern (SQLite integers are signed).
    return run(
        w,
        "UPDATE device_seq SET last_processed_seq = ?, last_mac = ? WHERE device = ? AND "
        "last_processed_seq = ?",
        [&](sql::Statement& s) {
          s.bind(1, static_cast<int64_t>(c.to)).bind(2, c.mac).bind(3, c.device);
          s.bind(4, static_cast<int64_t>(c.from));
        },
        1, what());
  }

  Status operator()(const change::SwitchLedger& c) const {
    auto s = run(
        w,
        "INSERT OR IGNORE INTO retired_ledgers(device, ledger_id, last_processed_seq, retired_ms) "
        "VALUES(?, ?, ?, ?)",
        [&](sql::Statement& st) {
          st.bind(1, c.device).bind(2, c.from).bind(3, static_cast<int64_t>(c.from_seq));
          st.bind(4, c.at_ms);
        });
    if (!s.ok()) return s;
    return run(
        w,
        "UPDATE device_seq SET ledger_id = ?, last_processed_seq = 0, last_mac = '' "
        "WHERE device = ? AND "
        "ledger_id = ? AND last_processed_seq = ?",
        [&](sql::Statement& st) {
          st.bind(1, c.to).bind(2, c.device).bind(3, c.from);
          st.bind(4, static_cast<int64_t>(c.from_seq));
        },
        1, what());
  }

  Status operator()(const change::SetNextKey& c) const {
    return run(
        w, "UPDATE devices SET next_key_hex = ? WHERE id = ?",
        [&](sql::Statement& st) { st.bind(1, c.key_hex).bind(2, c.device); }, 1, what());
  }

  Status operator()(const change::PromoteNextKey& c) const {
    return run(
        w,
        "UPDATE devices SET key_hex = next_key_hex, next_key_hex = '' "
        "WHERE id = ? AND next_key_hex = ?",
        [&](sql::Statement& st) { st.bind(1, c.device).bind(2, c.key_hex); }, 1, what());
  }

  Status operator()(const change::DecommissionDevice& c) const {
    return run(
        w,
        "UPDATE devices SET decommissioned_ms = ?, next_key_hex = '' "
        "WHERE id = ? AND decommissioned_ms = 0",
        [&](sql::Statement& st) { st.bind(1, c.at_ms).bind(2, c.device); }, 1, what());
  }

  Status operator()(const change::PutSnapshot& c) const {
    return run(w,
               "INSERT INTO snapshots(device, payload, at_ms) VALUES(?, ?, ?) "
               "ON CONFLICT(device) DO UPDATE SET payload = excluded.payload, "
               "at_ms = excluded.at_ms",
               [&](sql::Statement& s) { s.bind(1, c.device).bind(2, c.payload).bind(3, c.at_ms); });
  }

  Status operator()(const change::PutReconcileReport& c) const {
    return run(w,
               "INSERT INTO reconcile_reports(device, report, at_ms) VALUES(?, ?, ?) "
               "ON CONFLICT(device) DO UPDATE SET report = excluded.report, "
               "at_ms = excluded.at_ms",
               [&](sql::Statement& s) { s.bind(1, c.device).bind(2, c.report).bind(3, c.at_ms); });
  }

  Status operator()(const change::InsertFault& c) const {
    const StoredFault& f = c.fault;
    auto s = run(w, "INSERT INTO faults(device, code, message, slot, at_ms) VALUES(?, ?, ?, ?, ?)",
                 [&](sql::Statement& st) {
                   st.bind(1, f.device).bind(2, f.code).bind(3, f.message);
                   st.bind(4, f.slot).bind(5, f.at_ms);
                 });
    if (!s.ok()) return s;
    int64_t keep_after = w.db().last_insert_rowid() - w.options().faults_max;
    if (keep_after <= 0) return {};
    return run(w, "DELETE FROM faults WHERE id <= ?",
               [&](sql::Statement& st) { st.bind(1, keep_after); });
  }

  Status operator()(const change::PutAccount& c) const {
    const StoredAccount& a = c.account;
    return run(w,
               "INSERT INTO accounts(name, role, machines, password_hash, created_ms, "
               "disabled_ms) VALUES(?, ?, ?, ?, ?, ?) ON CONFLICT(name) DO UPDATE SET "
               "role = excluded.role, machines = excluded.machines, "
               "password_hash = excluded.password_hash, disabled_ms = excluded.disabled_ms",
               [&](sql::Statement& s) {
                 s.bind(1, a.name).bind(2, to_string(a.role)).bind(3, join_machines(a.machines));
                 s.bind(4, a.password_hash).bind(5, a.created_ms).bind(6, a.disabled_ms);
               });
  }

  Status operator()(const change::InsertApiToken& c) const {
    const StoredApiToken& t = c.token;
    return run(w,
               "INSERT INTO api_tokens(id, account, sha256_hex, label, created_ms, expires_ms) "
               "VALUES(?, ?, ?, ?, ?, ?)",
               [&](sql::Statement& s) {
                 s.bind(1, t.id).bind(2, t.account).bind(3, t.sha256_hex).bind(4, t.label);
                 s.bind(5, t.created_ms).bind(6, t.expires_ms);
               });
  }

  Status operator()(const change::RevokeApiToken& c) const {
    return run(
        w, "UPDATE api_tokens SET revoked_ms = ? WHERE id = ? AND revoked_ms = 0",
        [&](sql::Statement& s) { s.bind(1, c.at_ms).bind(2, c.id); }, 1, what());
  }

  Status operator()(const change::InsertAudit& c) const {
    const AuditEntry& e = c.entry;
    return run(w,
               "INSERT INTO audit(at_ms, account, action, device, order_id, detail, peer) "
               "VALUES(?, ?, ?, ?, ?, ?, ?)",
               [&](sql::Statement& s) {
                 s.bind(1, e.at_ms).bind(2, e.account).bind(3, e.action).bind(4, e.device);
                 s.bind(5, e.order_id).bind(6, e.detail).bind(7, e.peer);
               });
  }

  Status operator()(const change::Raw& c) const { return c.write(w.raw_context()); }
};

}  // namespace

Status apply_change(SqliteWriter& writer, const Change& change) {
  return std::visit(SqliteApply{writer, change}, change);
}

}  // namespace vend::agent::detail
