// Repository: SQLite reads on the read connection (start-up load, look-ups, audit).
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "repository/repository_schema.hpp"
#include "repository/repository_sqlite.hpp"
#include "vend/json_writer.hpp"

namespace vend::agent {

namespace {

constexpr const char* kOpenStates = "('RESERVED', 'PAID', 'DISPATCHED')";

// Runs a query, calling on_row for every row.
template <typename Bind, typename OnRow>
Status query(sql::Database& db, const std::string& sql, Bind&& bind, OnRow&& on_row) {
  auto stmt = db.prepare(sql);
  if (!stmt.ok()) return stmt.error();
  bind(*stmt);
  while (true) {
    auto row = stmt->step();
    if (!row.ok()) return row.error();
    if (!*row) return {};
    on_row(*stmt);
  }
}

template <typename OnRow>
Status query(sql::Database& db, const std::string& sql, OnRow&& on_row) {
  return query(
      db, sql, [](sql::Statement&) {}, std::forward<OnRow>(on_row));
}

StoredPayment read_payment(const sql::Statement& s) {
  return StoredPayment{s.column_text(0), s.column_text(1), s.column_int64(2), s.column_text(3),
                       s.column_int64(4)};
}

constexpr const char* kPaymentColumns = "payment_id, order_id, amount_cents, outcome, at_ms";

constexpr const char* kRefundColumns =
    "payment_id, order_id, amount_cents, reason, at_ms, state, attempts, last_error, updated_ms, "
    "device";

StoredRefund read_refund(const sql::Statement& s) {
  StoredRefund r = new_refund(s.column_text(0), s.column_text(1), s.column_int64(2),
                              s.column_text(3), s.column_int64(4));
  r.state = parse_refund_state(s.column_text(5)).value_or(RefundState::kPending);
  r.attempts = s.column_int(6);
  r.last_error = s.column_text(7);
  r.updated_ms = s.column_int64(8);
  r.device = s.column_text(9);
  return r;
}

// What a load reads: every machine, or (a filtered load) the accepted
// ones, a JSON array bound to ?1 of every query that names `in_scope()`.
struct Scope {
  bool all = true;
  std::string devices_json;  // the accepted machines' ids

  std::string in_scope(const char* column) const {
    return all ? std::string("1") : std::string(column) + " IN (SELECT value FROM json_each(?1))";
  }
  void bind(sql::Statement& st) const {
    if (!all) st.bind(1, devices_json);
  }
};

std::string json_array(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const auto& item : items) {
    if (out.size() > 1) out += ',';
    json::append_string(out, item);
  }
  return out + "]";
}

// The accepted machines' ids: the one read of the whole fleet (its ids
// alone, from the primary key's index).
Result<Scope> scope_of(sql::Database& db, const LoadFilter& only) {
  Scope scope;
  if (!only) return scope;
  std::vector<std::string> accepted;
  auto s = query(db, "SELECT id FROM devices ORDER BY id", [&](const sql::Statement& st) {
    std::string id = st.column_text(0);
    if (only(id)) accepted.push_back(std::move(id));
  });
  if (!s.ok()) return s.error();
  scope.all = false;
  scope.devices_json = json_array(accepted);
  return scope;
}

Status load_pending_refunds(sql::Database& db, LoadedState& out) {
  return query(
      db,
      std::string("SELECT ") + kRefundColumns +
          " FROM refunds WHERE state = 'PENDING' ORDER BY at_ms, payment_id",
      [](sql::Statement&) {},
      [&](const sql::Statement& st) { out.pending_refunds.push_back(read_refund(st)); });
}

Status load_devices(sql::Database& db, const Scope& scope, LoadedState& out) {
  auto s = query(
      db,
      "SELECT d.id, d.key_hex, d.created_ms, COALESCE(q.last_processed_seq, 0), "
      "d.next_key_hex, d.decommissioned_ms, COALESCE(q.ledger_id, ''), "
      "COALESCE(q.last_mac, '') "
      "FROM devices d LEFT JOIN device_seq q ON q.device = d.id WHERE " +
          scope.in_scope("d.id") + " ORDER BY d.id",
      [&](sql::Statement& st) { scope.bind(st); },
      [&](const sql::Statement& st) {
        out.devices.push_back({st.column_text(0),
                               st.column_text(1),
                               st.column_int64(2),
                               static_cast<uint64_t>(st.column_int64(3)),
                               st.column_text(4),
                               st.column_int64(5),
                               st.column_text(6),
                               {},
                               st.column_text(7)});
      });
  if (!s.ok()) return s;
  std::map<std::string, std::vector<std::string>> retired;
  s = query(
      db,
      "SELECT device, ledger_id FROM retired_ledgers WHERE " + scope.in_scope("device") +
          " ORDER BY device, retired_ms",
      [&](sql::Statement& st) { scope.bind(st); },
      [&](const sql::Statement& st) { retired[st.column_text(0)].push_back(st.column_text(1)); });
  for (auto& d : out.devices) d.retired_ledgers = std::move(retired[d.id]);
  return s;
}

// The sold and burned counts are the slot's counters (schema v9).
Status load_slots(sql::Database& db, const Scope& scope, LoadedState& out) {
  return query(
      db,
      "SELECT device, slot, product, price_cents, capacity, sold, burned FROM slots WHERE " +
          scope.in_scope("device") + " ORDER BY device, slot",
      [&](sql::Statement& st) { scope.bind(st); },
      [&](const sql::Statement& s) {
        LoadedState::Slot slot;
        slot.device = s.column_text(0);
        slot.spec = SlotSpec{s.column_int(1), s.column_text(2), s.column_int64(3), s.column_int(4)};
        slot.sold = s.column_int64(5);
        slot.burned = s.column_int64(6);
        out.slots.push_back(std::move(slot));
      });
}

Status load_orders(sql::Database& db, const Scope& scope, size_t recent_max, LoadedState& out) {
  auto s = query(
      db,
      std::string("SELECT ") + detail::kOrderColumns + " FROM orders WHERE state IN " +
          kOpenStates + " AND " + scope.in_scope("device") + " ORDER BY created_ms, id",
      [&](sql::Statement& st) { scope.bind(st); },
      [&](const sql::Statement& st) { out.open_orders.push_back(detail::read_order(st)); });
  if (!s.ok()) return s;
  s = query(
      db,
      std::string("SELECT ") + detail::kOrderColumns + " FROM orders WHERE state NOT IN " +
          kOpenStates + " AND " + scope.in_scope("device") +
          " ORDER BY updated_ms DESC, id LIMIT ?2",
      [&](sql::Statement& st) {
        scope.bind(st);
        st.bind(2, static_cast<int64_t>(recent_max));
      },
      [&](const sql::Statement& st) { out.recent_orders.push_back(detail::read_order(st)); });
  if (!s.ok() || !scope.all) return s;  // a filtered load counts what it loaded
  return query(db, "SELECT state, count(*) FROM orders GROUP BY state",
               [&](const sql::Statement& st) {
                 if (auto state = parse_order_state(st.column_text(0))) {
                   out.order_counts[*state] = st.column_int64(1);
                 }
               });
}

Status load_payments(sql::Database& db, size_t recent_max, LoadedState& out) {
  return query(
      db,
      std::string("SELECT ") + kPaymentColumns +
          " FROM payments WHERE order_id IN (SELECT id FROM orders WHERE state IN " + kOpenStates +
          " UNION ALL SELECT id FROM (SELECT id FROM orders WHERE state NOT IN " + kOpenStates +
          " ORDER BY updated_ms DESC, id LIMIT ?))"
          // Payments for orders the agent never had: their repeats must get
          // the same answer (and never a second row).
          " OR outcome = 'unknown_order_refunded' ORDER BY at_ms, payment_id",
      [&](sql::Statement& st) { st.bind(1, static_cast<int64_t>(recent_max)); },
      [&](const sql::Statement& st) { out.payments.push_back(read_payment(st)); });
}

// A filtered load: the payments of the loaded orders (by order id), and of
// unknown orders (their partial index); keep_accepted() keeps the owned.
Status load_payments_of_loaded(sql::Database& db, LoadedState& out) {
  std::vector<std::string> ids;
  for (const auto* orders_of : {&out.open_orders, &out.recent_orders}) {
    for (const Order& o : *orders_of) ids.push_back(o.id);
  }
  return query(
      db,
      std::string("SELECT ") + kPaymentColumns +
          " FROM payments WHERE order_id IN (SELECT value FROM json_each(?1)) "
          "UNION SELECT " +
          kPaymentColumns + " FROM payments WHERE outcome = 'unknown_order_refunded' ORDER BY 5, 1",
      [&](sql::Statement& st) { st.bind(1, json_array(ids)); },
      [&](const sql::Statement& st) { out.payments.push_back(read_payment(st)); });
}

Status load_pool_and_restocks(sql::Database& db, const Scope& scope, LoadedState& out) {
  auto s = query(
      db,
      "SELECT token, device, slot FROM pool_tokens WHERE state = 'POOL' AND " +
          scope.in_scope("device") + " ORDER BY rowid",
      [&](sql::Statement& st) { scope.bind(st); },
      [&](const sql::Statement& st) {
        out.pool.push_back({st.column_text(0), st.column_text(1), st.column_int(2)});
      });
  if (!s.ok()) return s;
  return query(
      db,
      "SELECT restock_id, device, slot, count FROM restocks WHERE state = 'REQUESTED' AND " +
          scope.in_scope("device"),
      [&](sql::Statement& st) { scope.bind(st); },
      [&](const sql::Statement& st) {
        out.requested.push_back(
            {st.column_text(0), st.column_text(1), st.column_int(2), st.column_int(3), false});
      });
}

// A filtered load: a pending refund written before schema v8 names no
// machine. It goes by its order's machine when the whole log's load holds
// that order (open, or among the recent_max most recently finished), else
// by its order id: the same owner on every instance, whatever each loads.
Status name_legacy_refunds(sql::Database& db, size_t recent_max, LoadedState& out) {
  for (StoredRefund& r : out.pending_refunds) {
    if (!r.device.empty()) continue;
    auto s = query(
        db,
        std::string("SELECT device FROM orders WHERE id = ?1 AND (state IN ") + kOpenStates +
            " OR id IN (SELECT id FROM orders WHERE state NOT IN " + kOpenStates +
            " ORDER BY updated_ms DESC, id LIMIT ?2))",
        [&](sql::Statement& st) {
          st.bind(1, r.order_id);
          st.bind(2, static_cast<int64_t>(recent_max));
        },
        [&](const sql::Statement& st) { r.device = st.column_text(0); });
    if (!s.ok()) return s;
  }
  return {};
}

Status load_all(sql::Database& db, size_t recent_max, const LoadFilter& only, LoadedState& out) {
  auto scope = scope_of(db, only);
  if (!scope.ok()) return scope.error();
  Status s = load_devices(db, *scope, out);
  if (s.ok()) s = load_slots(db, *scope, out);
  if (s.ok()) s = load_pool_and_restocks(db, *scope, out);
  if (s.ok()) s = load_orders(db, *scope, recent_max, out);
  if (s.ok())
    s = scope->all ? load_payments(db, recent_max, out) : load_payments_of_loaded(db, out);
  if (s.ok()) s = load_pending_refunds(db, out);
  if (s.ok() && !scope->all) s = name_legacy_refunds(db, recent_max, out);
  if (s.ok() && !scope->all) keep_accepted(out, only);
  return s;
}

}  // namespace

Result<LoadedState> detail::SqliteBackend::load(size_t recent_orders_max, const LoadFilter& only) {
  std::lock_guard lock(read_mu_);
  // One read transaction: a consistent snapshot even while the writer runs.
  if (auto s = read_db_.exec("BEGIN"); !s.ok()) return s.error();
  LoadedState out;
  Status s = load_all(read_db_, recent_orders_max, only, out);
  (void)read_db_.exec("COMMIT");
  if (!s.ok()) return s.error();
  return out;
}

Result<std::optional<Order>> detail::SqliteBackend::find_order(const std::string& order_id) {
  std::lock_guard lock(read_mu_);
  std::optional<Order> out;
  auto s = query(
      read_db_, std::string("SELECT ") + detail::kOrderColumns + " FROM orders WHERE id = ?",
      [&](sql::Statement& st) { st.bind(1, order_id); },
      [&](const sql::Statement& st) { out = detail::read_order(st); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::optional<Order>> detail::SqliteBackend::find_order_by_idempotency_key(
    const std::string& key) {
  std::lock_guard lock(read_mu_);
  std::optional<Order> out;
  auto s = query(
      read_db_,
      std::string("SELECT ") + detail::kOrderColumns + " FROM orders WHERE idempotency_key = ?",
      [&](sql::Statement& st) { st.bind(1, key); },
      [&](const sql::Statement& st) { out = detail::read_order(st); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::optional<StoredPayment>> detail::SqliteBackend::find_payment(
    const std::string& payment_id) {
  std::lock_guard lock(read_mu_);
  std::optional<StoredPayment> out;
  auto s = query(
      read_db_, std::string("SELECT ") + kPaymentColumns + " FROM payments WHERE payment_id = ?",
      [&](sql::Statement& st) { st.bind(1, payment_id); },
      [&](const sql::Statement& st) { out = read_payment(st); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::vector<StoredPayment>> detail::SqliteBackend::payments_of(const std::string& order_id) {
  std::lock_guard lock(read_mu_);
  std::vector<StoredPayment> out;
  auto s = query(
      read_db_,
      std::string("SELECT ") + kPaymentColumns +
          " FROM payments WHERE order_id = ? ORDER BY at_ms, payment_id",
      [&](sql::Statement& st) { st.bind(1, order_id); },
      [&](const sql::Statement& st) { out.push_back(read_payment(st)); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::optional<StoredRestock>> detail::SqliteBackend::find_restock(
    const std::string& device, const std::string& restock_id) {
  std::lock_guard lock(read_mu_);
  std::optional<StoredRestock> out;
  auto s = query(
      read_db_,
      "SELECT restock_id, device, slot, count, state FROM restocks WHERE device = ? AND "
      "restock_id = ?",
      [&](sql::Statement& st) { st.bind(1, device).bind(2, restock_id); },
      [&](const sql::Statement& st) {
        out = StoredRestock{st.column_text(0), st.column_text(1), st.column_int(2),
                            st.column_int(3), st.column_text(4) == "MINTED"};
      });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::vector<std::string>> detail::SqliteBackend::known_tokens(
    const std::vector<std::string>& tokens) {
  std::lock_guard lock(read_mu_);
  std::vector<std::string> out;
  for (const auto& token : tokens) {
    auto s = query(
        read_db_, "SELECT 1 FROM pool_tokens WHERE token = ?",
        [&](sql::Statement& st) { st.bind(1, token); },
        [&](const sql::Statement&) { out.push_back(token); });
    if (!s.ok()) return s.error();
  }
  return out;
}

Result<std::map<TokenState, int64_t>> detail::SqliteBackend::token_counts(const std::string& device,
                                                                          int slot) {
  std::lock_guard lock(read_mu_);
  std::map<TokenState, int64_t> out;
  auto s = query(
      read_db_,
      "SELECT state, count(*) FROM pool_tokens WHERE device = ? AND slot = ? GROUP BY state",
      [&](sql::Statement& st) { st.bind(1, device).bind(2, slot); },
      [&](const sql::Statement& st) {
        if (auto state = parse_token_state(st.column_text(0))) out[*state] = st.column_int64(1);
      });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::optional<TokenState>> detail::SqliteBackend::token_state(const std::string& token) {
  std::lock_guard lock(read_mu_);
  std::optional<TokenState> out;
  auto s = query(
      read_db_, "SELECT state FROM pool_tokens WHERE token = ?",
      [&](sql::Statement& st) { st.bind(1, token); },
      [&](const sql::Statement& st) { out = parse_token_state(st.column_text(0)); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::vector<OrderEvent>> detail::SqliteBackend::order_events(const std::string& order_id) {
  std::lock_guard lock(read_mu_);
  std::vector<OrderEvent> out;
  auto s = query(
      read_db_,
      "SELECT order_id, from_state, to_state, at_ms, detail FROM order_events "
      "WHERE order_id = ? ORDER BY id",
      [&](sql::Statement& st) { st.bind(1, order_id); },
      [&](const sql::Statement& st) {
        out.push_back({st.column_text(0), st.column_text(1), st.column_text(2), st.column_int64(3),
                       st.column_text(4)});
      });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::vector<StoredRefund>> detail::SqliteBackend::refunds_of(const std::string& order_id) {
  std::lock_guard lock(read_mu_);
  std::vector<StoredRefund> out;
  auto s = query(
      read_db_,
      std::string("SELECT ") + kRefundColumns +
          " FROM refunds WHERE order_id = ? ORDER BY at_ms, "
          "payment_id",
      [&](sql::Statement& st) { st.bind(1, order_id); },
      [&](const sql::Statement& st) { out.push_back(read_refund(st)); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::vector<StoredRefund>> detail::SqliteBackend::refunds(std::optional<RefundState> state,
                                                                 size_t limit) {
  std::lock_guard lock(read_mu_);
  std::vector<StoredRefund> out;
  auto s = query(
      read_db_,
      std::string("SELECT ") + kRefundColumns + " FROM refunds WHERE (?1 IS NULL OR state = ?1) " +
          "ORDER BY updated_ms DESC, payment_id LIMIT ?2",
      [&](sql::Statement& st) {
        if (state) {
          st.bind(1, to_string(*state));
        } else {
          st.bind_null(1);
        }
        st.bind(2, static_cast<int64_t>(limit));
      },
      [&](const sql::Statement& st) { out.push_back(read_refund(st)); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::optional<StoredSnapshot>> detail::SqliteBackend::snapshot(const std::string& device) {
  std::lock_guard lock(read_mu_);
  std::optional<StoredSnapshot> out;
  auto s = query(
      read_db_, "SELECT payload, at_ms FROM snapshots WHERE device = ?",
      [&](sql::Statement& st) { st.bind(1, device); },
      [&](const sql::Statement& st) {
        out = StoredSnapshot{st.column_text(0), st.column_int64(1)};
      });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::optional<std::string>> detail::SqliteBackend::reconcile_report(
    const std::string& device) {
  std::lock_guard lock(read_mu_);
  std::optional<std::string> out;
  auto s = query(
      read_db_, "SELECT report FROM reconcile_reports WHERE device = ?",
      [&](sql::Statement& st) { st.bind(1, device); },
      [&](const sql::Statement& st) { out = st.column_text(0); });
  if (!s.ok()) return s.error();
  return out;
}

Result<std::vector<StoredFault>> detail::SqliteBackend::faults(const std::string& device,
                                                               size_t limit) {
  std::lock_guard lock(read_mu_);
  std::vector<StoredFault> out;
  auto s = query(
      read_db_,
      "SELECT device, code, message, slot, at_ms FROM faults WHERE device = ? "
      "ORDER BY id DESC LIMIT ?",
      [&](sql::Statement& st) { st.bind(1, device).bind(2, static_cast<int64_t>(limit)); },
      [&](const sql::Statement& st) {
        out.push_back({st.column_text(0), st.column_text(1), st.column_text(2), st.column_int(3),
                       st.column_int64(4)});
      });
  if (!s.ok()) return s.error();
  return out;
}

}  // namespace vend::agent
