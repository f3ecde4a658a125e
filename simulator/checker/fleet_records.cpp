// Reads ledgers and the agent database into FleetRecords. Table and column
// names: firmware/src/ledger_schema.hpp, cloud-agent/repository/repository_schema.cpp.
#include "checker/fleet_records.hpp"

#include <functional>
#include <variant>

#include "vend/protocol.hpp"

namespace vend::sim::detail {

namespace {

// Runs `sql` and hands every row to `row`.
Status for_each_row(sql::Database& db, const std::string& sql,
                    const std::function<void(const sql::Statement&)>& row) {
  auto stmt = db.prepare(sql);
  if (!stmt.ok()) return stmt.error();
  for (;;) {
    auto more = stmt->step();
    if (!more.ok()) return more.error();
    if (!*more) return {};
    row(*stmt);
  }
}

}  // namespace

Status load_ledger(sql::Database& db, LedgerRecords& out) {
  // One read transaction: tokens and dispenses from the same instant.
  if (Status s = db.exec("BEGIN"); !s.ok()) return s;
  Status s = for_each_row(db, "SELECT token, slot, state, ifnull(order_id, '') FROM tokens",
                          [&](const sql::Statement& r) {
                            out.tokens[r.column_text(0)] =
                                LedgerToken{r.column_int(1), r.column_text(2), r.column_text(3)};
                          });
  if (s.ok()) {
    s = for_each_row(db,
                     "SELECT order_id, slot, token, state, token_consumed FROM dispenses "
                     "ORDER BY order_id",
                     [&](const sql::Statement& r) {
                       out.dispenses.push_back(LedgerDispense{r.column_text(0), r.column_int(1),
                                                              r.column_text(2), r.column_text(3),
                                                              r.column_int(4) != 0});
                     });
  }
  (void)db.exec("COMMIT");
  return s;
}

Status load_unreported_results(sql::Database& db, LedgerRecords& out) {
  return for_each_row(db, "SELECT payload FROM outbox", [&](const sql::Statement& r) {
    auto event = proto::decode_event(r.column_text(0));
    if (!event.ok()) return;
    if (const auto* result = std::get_if<proto::DispenseResult>(&event->message.body)) {
      out.unreported_results.insert(result->order_id);
    }
    if (const auto* start = std::get_if<proto::DispenseStarted>(&event->message.body)) {
      out.unacked_starts.insert(start->order_id);
    }
  });
}

Status load_agent(sql::Database& db, AgentRecords& out) {
  if (Status s = db.exec("BEGIN"); !s.ok()) return s;
  out.present = true;
  Status s =
      for_each_row(db, "SELECT token, device, slot, state, ifnull(order_id, '') FROM pool_tokens",
                   [&](const sql::Statement& r) {
                     out.tokens[r.column_text(0)] = AgentToken{r.column_text(1), r.column_int(2),
                                                               r.column_text(3), r.column_text(4)};
                   });
  if (s.ok()) {
    s = for_each_row(db,
                     "SELECT id, device, slot, token, state, ifnull(payment_id, ''), reason "
                     "FROM orders",
                     [&](const sql::Statement& r) {
                       out.orders[r.column_text(0)] = AgentOrder{
                           r.column_text(0), r.column_text(1), r.column_int(2), r.column_text(3),
                           r.column_text(4), r.column_text(5), r.column_text(6)};
                     });
  }
  if (s.ok()) {
    s = for_each_row(
        db, "SELECT payment_id, order_id, outcome FROM payments", [&](const sql::Statement& r) {
          auto& into =
              r.column_text(2) == "applied" ? out.applied_payments : out.unapplied_payments;
          into[r.column_text(0)] = r.column_text(1);
        });
  }
  if (s.ok()) {
    s = for_each_row(db, "SELECT payment_id, order_id FROM refunds", [&](const sql::Statement& r) {
      out.refunds[r.column_text(0)] = r.column_text(1);
    });
  }
  (void)db.exec("COMMIT");
  return s;
}

}  // namespace vend::sim::detail
