// PostgreSQL reads on the read connection (start-up load, look-ups, audit).
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "postgres/postgres_backend.hpp"
#include "postgres/postgres_changes.hpp"
#include "postgres/postgres_schema.hpp"

namespace vend::agent::pg {

namespace {

constexpr const char* kOpenStates = "('RESERVED', 'PAID', 'DISPATCHED')";
constexpr const char* kPaymentColumns = "payment_id, order_id, amount_cents, outcome, at_ms";
constexpr const char* kRefundColumns =
    "payment_id, order_id, amount_cents, reason, at_ms, state, attempts, last_error, updated_ms, "
    "device";

std::optional<std::string> num(int64_t v) { return std::to_string(v); }

Order read_order(const PgResult& r, int row) {
  Order o;
  o.id = r.text(row, 0);
  o.device = r.text(row, 1);
  o.slot = r.int32(row, 2);
  o.token = r.text(row, 3);
  o.price_cents = r.int64(row, 4);
  o.state = parse_order_state(r.text(row, 5)).value_or(OrderState::kNeedsReview);
  o.created_ms = r.int64(row, 6);
  o.updated_ms = r.int64(row, 7);
  o.reserve_deadline_ms = r.int64(row, 8);
  o.dispatch_expires_at_ms = r.int64(row, 9);
  o.payment_id = r.text(row, 10);
  o.reason = r.text(row, 11);
  o.idempotency_key = r.text(row, 12);
  o.client = r.text(row, 13);
  return o;
}

StoredPayment read_payment(const PgResult& r, int row) {
  return StoredPayment{r.text(row, 0), r.text(row, 1), r.int64(row, 2), r.text(row, 3),
                       r.int64(row, 4)};
}

StoredRefund read_refund(const PgResult& r, int row) {
  StoredRefund f =
      new_refund(r.text(row, 0), r.text(row, 1), r.int64(row, 2), r.text(row, 3), r.int64(row, 4));
  f.state = parse_refund_state(r.text(row, 5)).value_or(RefundState::kPending);
  f.attempts = r.int32(row, 6);
  f.last_error = r.text(row, 7);
  f.updated_ms = r.int64(row, 8);
  f.device = r.text(row, 9);
  return f;
}

std::string orders_where(const char* where) {
  return std::string("SELECT ") + kOrderColumns + " FROM orders WHERE " + where;
}

// The load's queries, in one read transaction; `q` runs one and returns its
// rows.
using LoadQuery = std::function<Result<PgResult>(const std::string&, const Params&)>;

// What a load reads: every machine, or (a filtered load) the accepted ones,
// a text[] that is $1 of every query naming in_scope() (NULL: every one).
struct Scope {
  std::optional<std::string> devices;  // text[] of the accepted ids

  bool all() const { return !devices; }
  std::string in_scope(const char* column) const {
    return all() ? std::string("$1::text[] IS NULL") : std::string(column) + " = ANY($1::text[])";
  }
};

// The accepted machines' ids: the one read of the whole fleet (its ids
// alone, an index-only scan of the primary key).
Result<Scope> scope_of(const LoadQuery& q, const LoadFilter& only) {
  if (!only) return Scope{};
  auto ids = q("SELECT id FROM devices ORDER BY id", Params{});
  if (!ids.ok()) return ids.error();
  std::vector<std::string> accepted;
  for (int i = 0; i < ids->rows(); ++i) {
    std::string id = ids->text(i, 0);
    if (only(id)) accepted.push_back(std::move(id));
  }
  return Scope{text_array(accepted)};
}

Status load_devices(const LoadQuery& q, const Scope& scope, LoadedState& out) {
  auto devices =
      q("SELECT d.id, d.key_hex, d.created_ms, COALESCE(s.last_processed_seq, 0), d.next_key_hex, "
        "d.decommissioned_ms, COALESCE(s.ledger_id, ''), COALESCE(s.last_mac, '') FROM devices d "
        "LEFT JOIN device_seq s ON s.device = d.id WHERE " +
            scope.in_scope("d.id") + " ORDER BY d.id",
        Params{scope.devices});
  if (!devices.ok()) return devices.error();
  auto retired = q("SELECT device, ledger_id FROM retired_ledgers WHERE " +
                       scope.in_scope("device") + " ORDER BY device, retired_ms",
                   Params{scope.devices});
  if (!retired.ok()) return retired.error();
  std::map<std::string, std::vector<std::string>> by_device;
  for (int i = 0; i < retired->rows(); ++i) {
    by_device[retired->text(i, 0)].push_back(retired->text(i, 1));
  }
  for (int i = 0; i < devices->rows(); ++i) {
    std::string id = devices->text(i, 0);
    out.devices.push_back({id, devices->text(i, 1), devices->int64(i, 2),
                           static_cast<uint64_t>(devices->int64(i, 3)), devices->text(i, 4),
                           devices->int64(i, 5), devices->text(i, 6), std::move(by_device[id]),
                           devices->text(i, 7)});
  }
  return {};
}

// The sold and burned counts are the slot's counters (schema v5).
Status load_slots(const LoadQuery& q, const Scope& scope, LoadedState& out) {
  auto slots =
      q("SELECT device, slot, product, price_cents, capacity, sold, burned FROM slots "
        "WHERE " +
            scope.in_scope("device") + " ORDER BY device, slot",
        Params{scope.devices});
  if (!slots.ok()) return slots.error();
  for (int i = 0; i < slots->rows(); ++i) {
    LoadedState::Slot s;
    s.device = slots->text(i, 0);
    s.spec =
        SlotSpec{slots->int32(i, 1), slots->text(i, 2), slots->int64(i, 3), slots->int32(i, 4)};
    s.sold = slots->int64(i, 5);
    s.burned = slots->int64(i, 6);
    out.slots.push_back(std::move(s));
  }
  return {};
}

Status load_stock(const LoadQuery& q, const Scope& scope, LoadedState& out) {
  if (auto s = load_slots(q, scope, out); !s.ok()) return s;
  auto pool = q("SELECT token, device, slot FROM pool_tokens WHERE state = 'POOL' AND " +
                    scope.in_scope("device") + " ORDER BY seq",
                Params{scope.devices});
  if (!pool.ok()) return pool.error();
  for (int i = 0; i < pool->rows(); ++i) {
    out.pool.push_back({pool->text(i, 0), pool->text(i, 1), pool->int32(i, 2)});
  }
  auto restocks =
      q("SELECT restock_id, device, slot, count FROM restocks WHERE state = "
        "'REQUESTED' AND " +
            scope.in_scope("device") + " ORDER BY device, restock_id",
        Params{scope.devices});
  if (!restocks.ok()) return restocks.error();
  for (int i = 0; i < restocks->rows(); ++i) {
    out.requested.push_back({restocks->text(i, 0), restocks->text(i, 1), restocks->int32(i, 2),
                             restocks->int32(i, 3), false});
  }
  return {};
}

Status load_orders(const LoadQuery& q, const Scope& scope, size_t recent_max, LoadedState& out) {
  std::string open_where = std::string("state IN ") + kOpenStates + " AND " +
                           scope.in_scope("device") + " ORDER BY created_ms, id";
  auto open = q(orders_where(open_where.c_str()), Params{scope.devices});
  if (!open.ok()) return open.error();
  for (int i = 0; i < open->rows(); ++i) out.open_orders.push_back(read_order(*open, i));
  std::string recent_where = std::string("state NOT IN ") + kOpenStates + " AND " +
                             scope.in_scope("device") + " ORDER BY updated_ms DESC, id LIMIT $2";
  auto recent = q(orders_where(recent_where.c_str()),
                  Params{scope.devices, num(static_cast<int64_t>(recent_max))});
  if (!recent.ok()) return recent.error();
  for (int i = 0; i < recent->rows(); ++i) out.recent_orders.push_back(read_order(*recent, i));
  if (!scope.all()) return {};  // a filtered load counts what it loaded
  auto counts = q("SELECT state, count(*) FROM orders GROUP BY state", Params{});
  if (!counts.ok()) return counts.error();
  for (int i = 0; i < counts->rows(); ++i) {
    if (auto state = parse_order_state(counts->text(i, 0))) {
      out.order_counts[*state] = counts->int64(i, 1);
    }
  }
  return {};
}

// Every loaded order's payments (by order id; the loaded orders are the
// open ones and the recent_max most recently finished), and the payments
// for orders the agent never had: their repeats must get the same answer
// (and never a second row). A filtered load keeps the owned ones.
Status load_payments(const LoadQuery& q, LoadedState& out) {
  std::vector<std::string> ids;
  for (const auto* orders_of : {&out.open_orders, &out.recent_orders}) {
    for (const Order& o : *orders_of) ids.push_back(o.id);
  }
  // One index look-up per loaded order: with `order_id = ANY($1)` and a
  // thousand ids the planner scanned every payment of the history instead
  // (150 ms at 200,000 payments); OFFSET 0 keeps the LATERAL subquery a
  // parameterised index scan.
  auto payments =
      q(std::string("SELECT ") + kPaymentColumns +
            " FROM unnest($1::text[]) AS x(wanted), LATERAL (SELECT " + kPaymentColumns +
            " FROM payments WHERE order_id = x.wanted OFFSET 0) p UNION SELECT " + kPaymentColumns +
            " FROM payments WHERE outcome = 'unknown_order_refunded' ORDER BY at_ms, payment_id",
        Params{text_array(ids)});
  if (!payments.ok()) return payments.error();
  for (int i = 0; i < payments->rows(); ++i) out.payments.push_back(read_payment(*payments, i));
  return {};
}

Status load_money(const LoadQuery& q, LoadedState& out) {
  if (auto s = load_payments(q, out); !s.ok()) return s;
  auto refunds = q(std::string("SELECT ") + kRefundColumns +
                       " FROM refunds WHERE state = 'PENDING' ORDER BY at_ms, payment_id",
                   Params{});
  if (!refunds.ok()) return refunds.error();
  for (int i = 0; i < refunds->rows(); ++i) {
    out.pending_refunds.push_back(read_refund(*refunds, i));
  }
  return {};
}

// A filtered load: a pending refund written before schema v4 names no
// machine. It goes by its order's machine when the whole log's load holds
// that order (open, or among the recent_max most recently finished), else
// by its order id: the same owner on every instance, whatever each loads.
Status name_legacy_refunds(const LoadQuery& q, size_t recent_max, LoadedState& out) {
  for (StoredRefund& r : out.pending_refunds) {
    if (!r.device.empty()) continue;
    auto device = q(std::string("SELECT device FROM orders WHERE id = $1 AND (state IN ") +
                        kOpenStates + " OR id IN (SELECT id FROM orders WHERE state NOT IN " +
                        kOpenStates + " ORDER BY updated_ms DESC, id LIMIT $2))",
                    Params{r.order_id, num(static_cast<int64_t>(recent_max))});
    if (!device.ok()) return device.error();
    if (device->rows() > 0) r.device = device->text(0, 0);
  }
  return {};
}

Status load_all(const LoadQuery& q, size_t recent_max, const LoadFilter& only, LoadedState& out) {
  auto scope = scope_of(q, only);
  if (!scope.ok()) return scope.error();
  Status s = load_devices(q, *scope, out);
  if (s.ok()) s = load_stock(q, *scope, out);
  if (s.ok()) s = load_orders(q, *scope, recent_max, out);
  if (s.ok()) s = load_money(q, out);
  if (s.ok() && only) s = name_legacy_refunds(q, recent_max, out);
  if (s.ok() && only) keep_accepted(out, only);
  return s;
}

}  // namespace

// REQUIRES: read_mu_ held. A lost read connection is reset once: reads
// change nothing, so retrying one is safe (unlike a write).
Result<PgResult> PostgresBackend::read(const std::string& sql, const Params& params) {
  auto r = read_.exec(sql, params);
  if (r.ok() || read_.ok()) return r;
  PQreset(read_.get());
  if (!read_.ok()) return r.error();
  return read_.exec(sql, params);
}

Result<LoadedState> PostgresBackend::load(size_t recent_orders_max, const LoadFilter& only) {
  std::lock_guard lock(read_mu_);
  // One snapshot for every query, even while the writer commits.
  if (auto b = read("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", {}); !b.ok()) {
    return b.error();
  }
  LoadedState out;
  LoadQuery q = [this](const std::string& sql, const Params& p) { return read_.exec(sql, p); };
  Status s = load_all(q, recent_orders_max, only, out);
  (void)read_.exec(s.ok() ? "COMMIT" : "ROLLBACK");
  if (!s.ok()) return s.error();
  return out;
}

Result<std::optional<Order>> PostgresBackend::find_order(const std::string& order_id) {
  std::lock_guard lock(read_mu_);
  auto r = read(orders_where("id = $1"), {order_id});
  if (!r.ok()) return r.error();
  if (r->rows() == 0) return std::optional<Order>{};
  return std::optional<Order>{read_order(*r, 0)};
}

Result<std::optional<Order>> PostgresBackend::find_order_by_idempotency_key(
    const std::string& key) {
  std::lock_guard lock(read_mu_);
  auto r = read(orders_where("idempotency_key = $1"), {key});
  if (!r.ok()) return r.error();
  if (r->rows() == 0) return std::optional<Order>{};
  return std::optional<Order>{read_order(*r, 0)};
}

Result<std::optional<StoredPayment>> PostgresBackend::find_payment(const std::string& payment_id) {
  std::lock_guard lock(read_mu_);
  auto r = read(std::string("SELECT ") + kPaymentColumns + " FROM payments WHERE payment_id = $1",
                {payment_id});
  if (!r.ok()) return r.error();
  if (r->rows() == 0) return std::optional<StoredPayment>{};
  return std::optional<StoredPayment>{read_payment(*r, 0)};
}

Result<std::vector<StoredPayment>> PostgresBackend::payments_of(const std::string& order_id) {
  std::lock_guard lock(read_mu_);
  auto r = read(std::string("SELECT ") + kPaymentColumns +
                    " FROM payments WHERE order_id = $1 ORDER BY at_ms, payment_id",
                {order_id});
  if (!r.ok()) return r.error();
  std::vector<StoredPayment> out;
  out.reserve(static_cast<size_t>(r->rows()));
  for (int i = 0; i < r->rows(); ++i) out.push_back(read_payment(*r, i));
  return out;
}

Result<std::optional<StoredRestock>> PostgresBackend::find_restock(const std::string& device,
                                                                   const std::string& restock_id) {
  std::lock_guard lock(read_mu_);
  auto r = read(
      "SELECT restock_id, device, slot, count, state FROM restocks WHERE device = $1 AND "
      "restock_id = $2",
      {device, restock_id});
  if (!r.ok()) return r.error();
  if (r->rows() == 0) return std::optional<StoredRestock>{};
  return std::optional<StoredRestock>{StoredRestock{r->text(0, 0), r->text(0, 1), r->int32(0, 2),
                                                    r->int32(0, 3), r->text(0, 4) == "MINTED"}};
}

Result<std::vector<std::string>> PostgresBackend::known_tokens(
    const std::vector<std::string>& tokens) {
  std::lock_guard lock(read_mu_);
  // In the order asked, as SQLite answers.
  auto r = read(
      "SELECT x.t FROM unnest($1::text[]) WITH ORDINALITY AS x(t, n) "
      "WHERE EXISTS (SELECT 1 FROM pool_tokens p WHERE p.token = x.t) ORDER BY x.n",
      {text_array(tokens)});
  if (!r.ok()) return r.error();
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(r->rows()));
  for (int i = 0; i < r->rows(); ++i) out.push_back(r->text(i, 0));
  return out;
}

Result<std::map<TokenState, int64_t>> PostgresBackend::token_counts(const std::string& device,
                                                                    int slot) {
  std::lock_guard lock(read_mu_);
  auto r =
      read("SELECT state, count(*) FROM pool_tokens WHERE device = $1 AND slot = $2 GROUP BY state",
           {device, num(slot)});
  if (!r.ok()) return r.error();
  std::map<TokenState, int64_t> out;
  for (int i = 0; i < r->rows(); ++i) {
    if (auto state = parse_token_state(r->text(i, 0))) out[*state] = r->int64(i, 1);
  }
  return out;
}

Result<std::optional<TokenState>> PostgresBackend::token_state(const std::string& token) {
  std::lock_guard lock(read_mu_);
  auto r = read("SELECT state FROM pool_tokens WHERE token = $1", {token});
  if (!r.ok()) return r.error();
  if (r->rows() == 0) return std::optional<TokenState>{};
  return parse_token_state(r->text(0, 0));
}

Result<std::vector<OrderEvent>> PostgresBackend::order_events(const std::string& order_id) {
  std::lock_guard lock(read_mu_);
  auto r = read(
      "SELECT order_id, from_state, to_state, at_ms, detail FROM order_events "
      "WHERE order_id = $1 ORDER BY id",
      {order_id});
  if (!r.ok()) return r.error();
  std::vector<OrderEvent> out;
  out.reserve(static_cast<size_t>(r->rows()));
  for (int i = 0; i < r->rows(); ++i) {
    out.push_back({r->text(i, 0), r->text(i, 1), r->text(i, 2), r->int64(i, 3), r->text(i, 4)});
  }
  return out;
}

Result<std::vector<StoredRefund>> PostgresBackend::refunds_of(const std::string& order_id) {
  std::lock_guard lock(read_mu_);
  auto r = read(std::string("SELECT ") + kRefundColumns +
                    " FROM refunds WHERE order_id = $1 ORDER BY at_ms, payment_id",
                {order_id});
  if (!r.ok()) return r.error();
  std::vector<StoredRefund> out;
  out.reserve(static_cast<size_t>(r->rows()));
  for (int i = 0; i < r->rows(); ++i) out.push_back(read_refund(*r, i));
  return out;
}

Result<std::vector<StoredRefund>> PostgresBackend::refunds(std::optional<RefundState> state,
                                                           size_t limit) {
  std::lock_guard lock(read_mu_);
  std::optional<std::string> wanted;
  if (state) wanted = to_string(*state);
  auto r = read(std::string("SELECT ") + kRefundColumns +
                    " FROM refunds WHERE ($1::text IS NULL OR state = $1) "
                    "ORDER BY updated_ms DESC, payment_id LIMIT $2",
                {wanted, num(static_cast<int64_t>(limit))});
  if (!r.ok()) return r.error();
  std::vector<StoredRefund> out;
  out.reserve(static_cast<size_t>(r->rows()));
  for (int i = 0; i < r->rows(); ++i) out.push_back(read_refund(*r, i));
  return out;
}

Result<std::optional<StoredSnapshot>> PostgresBackend::snapshot(const std::string& device) {
  std::lock_guard lock(read_mu_);
  auto r = read("SELECT payload, at_ms FROM snapshots WHERE device = $1", {device});
  if (!r.ok()) return r.error();
  if (r->rows() == 0) return std::optional<StoredSnapshot>{};
  return std::optional<StoredSnapshot>{StoredSnapshot{r->text(0, 0), r->int64(0, 1)}};
}

Result<std::optional<std::string>> PostgresBackend::reconcile_report(const std::string& device) {
  std::lock_guard lock(read_mu_);
  auto r = read("SELECT report FROM reconcile_reports WHERE device = $1", {device});
  if (!r.ok()) return r.error();
  if (r->rows() == 0) return std::optional<std::string>{};
  return std::optional<std::string>{r->text(0, 0)};
}

Result<std::vector<StoredFault>> PostgresBackend::faults(const std::string& device, size_t limit) {
  std::lock_guard lock(read_mu_);
  auto r = read(
      "SELECT device, code, message, slot, at_ms FROM faults WHERE device = $1 "
      "ORDER BY id DESC LIMIT $2",
      {device, num(static_cast<int64_t>(limit))});
  if (!r.ok()) return r.error();
  std::vector<StoredFault> out;
  out.reserve(static_cast<size_t>(r->rows()));
  for (int i = 0; i < r->rows(); ++i) {
    out.push_back({r->text(i, 0), r->text(i, 1), r->text(i, 2), r->int32(i, 3), r->int64(i, 4)});
  }
  return out;
}

}  // namespace vend::agent::pg
