// Repository: the SQL of every change the agent core makes.
#include <utility>

#include "repository_schema.hpp"
#include "vend/agent/repository.hpp"

namespace vend::agent {

namespace {

// Runs one statement. With expect >= 0, any other number of changed rows is
// a "conflict" naming `what`: the caller's memory disagrees with the log.
template <typename Bind>
Status run(WriteContext& ctx, const std::string& sql, Bind&& bind, int expect = -1,
           const std::string& what = "") {
  auto stmt = ctx.statement(sql);
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

Status insert_order_event(WriteContext& ctx, const std::string& order_id, const std::string& from,
                          const std::string& to, int64_t at_ms, const std::string& detail) {
  return run(ctx,
             "INSERT INTO order_events(order_id, from_state, to_state, at_ms, detail) "
             "VALUES(?, ?, ?, ?, ?)",
             [&](sql::Statement& s) {
               s.bind(1, order_id).bind(2, from).bind(3, to).bind(4, at_ms).bind(5, detail);
             });
}

}  // namespace

void Changeset::insert_device(const std::string& id, const std::string& key_hex,
                              int64_t created_ms) {
  add([=](WriteContext& ctx) -> Status {
    auto s = run(ctx, "INSERT INTO devices(id, key_hex, created_ms) VALUES(?, ?, ?)",
                 [&](sql::Statement& st) { st.bind(1, id).bind(2, key_hex).bind(3, created_ms); });
    if (!s.ok()) return s;
    return run(ctx, "INSERT INTO device_seq(device, last_processed_seq) VALUES(?, 0)",
               [&](sql::Statement& st) { st.bind(1, id); });
  });
}

void Changeset::upsert_slot(const std::string& device, const SlotSpec& slot) {
  add([=](WriteContext& ctx) {
    return run(ctx,
               "INSERT INTO slots(device, slot, product, price_cents, capacity) "
               "VALUES(?, ?, ?, ?, ?) ON CONFLICT(device, slot) DO UPDATE SET "
               "product = excluded.product, price_cents = excluded.price_cents, "
               "capacity = excluded.capacity",
               [&](sql::Statement& s) {
                 s.bind(1, device).bind(2, slot.slot).bind(3, slot.product);
                 s.bind(4, slot.price_cents).bind(5, slot.capacity);
               });
  });
}

void Changeset::insert_order(const Order& order, const std::string& detail) {
  add([=](WriteContext& ctx) -> Status {
    auto s = run(ctx,
                 std::string("INSERT INTO orders(") + detail::kOrderColumns +
                     ") VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 [&](sql::Statement& st) {
                   st.bind(1, order.id).bind(2, order.device).bind(3, order.slot);
                   st.bind(4, order.token).bind(5, order.price_cents);
                   st.bind(6, to_string(order.state)).bind(7, order.created_ms);
                   st.bind(8, order.updated_ms).bind(9, order.reserve_deadline_ms);
                   st.bind(10, order.dispatch_expires_at_ms);
                   detail::bind_optional(st, 11, order.payment_id);
                   st.bind(12, order.reason);
                   detail::bind_optional(st, 13, order.idempotency_key);
                 });
    if (!s.ok()) return s;
    return insert_order_event(ctx, order.id, "", to_string(order.state), order.created_ms, detail);
  });
}

void Changeset::transition_order(const Order& after, OrderState from, const std::string& detail) {
  add([=](WriteContext& ctx) -> Status {
    auto s = run(
        ctx,
        "UPDATE orders SET state = ?, updated_ms = ?, dispatch_expires_at_ms = ?, "
        "payment_id = ?, reason = ? WHERE id = ? AND state = ?",
        [&](sql::Statement& st) {
          st.bind(1, to_string(after.state)).bind(2, after.updated_ms);
          st.bind(3, after.dispatch_expires_at_ms);
          detail::bind_optional(st, 4, after.payment_id);
          st.bind(5, after.reason).bind(6, after.id).bind(7, to_string(from));
        },
        1, "order " + after.id + " " + to_string(from) + " -> " + to_string(after.state));
    if (!s.ok()) return s;
    return insert_order_event(ctx, after.id, to_string(from), to_string(after.state),
                              after.updated_ms, detail);
  });
}

void Changeset::move_token(const std::string& token, TokenState from, TokenState to,
                           const std::string& order_id) {
  add([=](WriteContext& ctx) {
    return run(
        ctx, "UPDATE pool_tokens SET state = ?, order_id = ? WHERE token = ? AND state = ?",
        [&](sql::Statement& s) {
          s.bind(1, to_string(to));
          detail::bind_optional(s, 2, order_id);
          s.bind(3, token).bind(4, to_string(from));
        },
        1, "token " + token + " " + to_string(from) + " -> " + to_string(to));
  });
}

void Changeset::insert_pool_tokens(const std::string& device, int slot,
                                   const std::string& restock_id,
                                   const std::vector<std::string>& tokens) {
  add([=](WriteContext& ctx) -> Status {
    for (const auto& token : tokens) {
      auto s = run(ctx,
                   "INSERT INTO pool_tokens(token, device, slot, restock_id, state, order_id) "
                   "VALUES(?, ?, ?, ?, 'POOL', NULL)",
                   [&](sql::Statement& st) {
                     st.bind(1, token).bind(2, device).bind(3, slot).bind(4, restock_id);
                   });
      if (!s.ok()) return s;
    }
    return {};
  });
}

void Changeset::put_restock(const StoredRestock& restock, int64_t at_ms) {
  add([=](WriteContext& ctx) {
    return run(ctx,
               "INSERT INTO restocks(restock_id, device, slot, count, state, updated_ms) "
               "VALUES(?, ?, ?, ?, ?, ?) ON CONFLICT(device, restock_id) DO UPDATE SET "
               "count = excluded.count, state = excluded.state, updated_ms = excluded.updated_ms",
               [&](sql::Statement& s) {
                 s.bind(1, restock.restock_id).bind(2, restock.device).bind(3, restock.slot);
                 s.bind(4, restock.count).bind(5, restock.minted ? "MINTED" : "REQUESTED");
                 s.bind(6, at_ms);
               });
  });
}

void Changeset::insert_payment(const StoredPayment& p) {
  add([=](WriteContext& ctx) {
    return run(ctx,
               "INSERT INTO payments(payment_id, order_id, amount_cents, outcome, at_ms) "
               "VALUES(?, ?, ?, ?, ?)",
               [&](sql::Statement& s) {
                 s.bind(1, p.payment_id).bind(2, p.order_id).bind(3, p.amount_cents);
                 s.bind(4, p.outcome).bind(5, p.at_ms);
               });
  });
}

void Changeset::insert_refund(const StoredRefund& r) {
  add([=](WriteContext& ctx) {
    return run(ctx,
               "INSERT INTO refunds(payment_id, order_id, amount_cents, reason, at_ms, state, "
               "attempts, last_error, updated_ms) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)",
               [&](sql::Statement& s) {
                 s.bind(1, r.payment_id).bind(2, r.order_id).bind(3, r.amount_cents);
                 s.bind(4, r.reason).bind(5, r.at_ms).bind(6, to_string(r.state));
                 s.bind(7, r.attempts).bind(8, r.last_error).bind(9, r.at_ms);
               });
  });
}

void Changeset::update_refund(const std::string& payment_id, RefundState state, int attempts,
                              const std::string& last_error, int64_t at_ms) {
  add([=](WriteContext& ctx) {
    return run(
        ctx,
        "UPDATE refunds SET state = ?, attempts = ?, last_error = ?, updated_ms = ? "
        "WHERE payment_id = ? AND state = 'PENDING'",
        [&](sql::Statement& s) {
          s.bind(1, to_string(state)).bind(2, attempts).bind(3, last_error);
          s.bind(4, at_ms).bind(5, payment_id);
        },
        1, "refund of " + payment_id);
  });
}

void Changeset::advance_device_seq(const std::string& device, uint64_t from, uint64_t to) {
  add([=](WriteContext& ctx) {
    // Seqs are stored as their 64-bit pattern (SQLite integers are signed).
    return run(
        ctx,
        "UPDATE device_seq SET last_processed_seq = ? WHERE device = ? AND "
        "last_processed_seq = ?",
        [&](sql::Statement& s) {
          s.bind(1, static_cast<int64_t>(to)).bind(2, device).bind(3, static_cast<int64_t>(from));
        },
        1, "device " + device + " seq " + std::to_string(from) + " -> " + std::to_string(to));
  });
}

void Changeset::switch_ledger(const std::string& device, const std::string& from, uint64_t from_seq,
                              const std::string& to, int64_t at_ms) {
  add([=](WriteContext& ctx) {
    auto s = run(
        ctx,
        "INSERT OR IGNORE INTO retired_ledgers(device, ledger_id, last_processed_seq, retired_ms) "
        "VALUES(?, ?, ?, ?)",
        [&](sql::Statement& st) {
          st.bind(1, device).bind(2, from).bind(3, static_cast<int64_t>(from_seq)).bind(4, at_ms);
        });
    if (!s.ok()) return s;
    return run(
        ctx,
        "UPDATE device_seq SET ledger_id = ?, last_processed_seq = 0 WHERE device = ? AND "
        "ledger_id = ? AND last_processed_seq = ?",
        [&](sql::Statement& st) {
          st.bind(1, to).bind(2, device).bind(3, from).bind(4, static_cast<int64_t>(from_seq));
        },
        1, "device " + device + " ledger '" + from + "' -> '" + to + "'");
  });
}

void Changeset::set_next_key(const std::string& device, const std::string& key_hex) {
  add([=](WriteContext& ctx) {
    return run(
        ctx, "UPDATE devices SET next_key_hex = ? WHERE id = ?",
        [&](sql::Statement& st) { st.bind(1, key_hex).bind(2, device); }, 1,
        "next key of device " + device);
  });
}

void Changeset::promote_next_key(const std::string& device, const std::string& key_hex) {
  add([=](WriteContext& ctx) {
    return run(
        ctx,
        "UPDATE devices SET key_hex = next_key_hex, next_key_hex = '' "
        "WHERE id = ? AND next_key_hex = ?",
        [&](sql::Statement& st) { st.bind(1, device).bind(2, key_hex); }, 1,
        "new key of device " + device);
  });
}

void Changeset::decommission_device(const std::string& device, int64_t at_ms) {
  add([=](WriteContext& ctx) {
    return run(
        ctx,
        "UPDATE devices SET decommissioned_ms = ?, next_key_hex = '' "
        "WHERE id = ? AND decommissioned_ms = 0",
        [&](sql::Statement& st) { st.bind(1, at_ms).bind(2, device); }, 1,
        "decommission of device " + device);
  });
}

void Changeset::put_snapshot(const std::string& device, const std::string& payload, int64_t at_ms) {
  add([=](WriteContext& ctx) {
    return run(ctx,
               "INSERT INTO snapshots(device, payload, at_ms) VALUES(?, ?, ?) "
               "ON CONFLICT(device) DO UPDATE SET payload = excluded.payload, "
               "at_ms = excluded.at_ms",
               [&](sql::Statement& s) { s.bind(1, device).bind(2, payload).bind(3, at_ms); });
  });
}

void Changeset::put_reconcile_report(const std::string& device, const std::string& report,
                                     int64_t at_ms) {
  add([=](WriteContext& ctx) {
    return run(ctx,
               "INSERT INTO reconcile_reports(device, report, at_ms) VALUES(?, ?, ?) "
               "ON CONFLICT(device) DO UPDATE SET report = excluded.report, "
               "at_ms = excluded.at_ms",
               [&](sql::Statement& s) { s.bind(1, device).bind(2, report).bind(3, at_ms); });
  });
}

void Changeset::insert_fault(const StoredFault& f) {
  add([=](WriteContext& ctx) -> Status {
    auto s =
        run(ctx, "INSERT INTO faults(device, code, message, slot, at_ms) VALUES(?, ?, ?, ?, ?)",
            [&](sql::Statement& st) {
              st.bind(1, f.device).bind(2, f.code).bind(3, f.message);
              st.bind(4, f.slot).bind(5, f.at_ms);
            });
    if (!s.ok()) return s;
    int64_t keep_after = ctx.db().last_insert_rowid() - ctx.options().faults_max;
    if (keep_after <= 0) return {};
    return run(ctx, "DELETE FROM faults WHERE id <= ?",
               [&](sql::Statement& st) { st.bind(1, keep_after); });
  });
}

}  // namespace vend::agent
