// PostgreSQL's commands for every change the agent core makes. The SQL is
// in postgres_schema.cpp (prepared once per connection); here only which
// statements a change runs, with which parameters.
#include "postgres/postgres_changes.hpp"

#include <string>
#include <utility>

namespace vend::agent::pg {

namespace {

std::optional<std::string> num(int64_t v) { return std::to_string(v); }
// "" is stored as NULL (UNIQUE columns that are often unset), as in SQLite.
std::optional<std::string> optional_text(const std::string& v) {
  if (v.empty()) return std::nullopt;
  return v;
}

struct PgCommands {
  std::vector<Command>& out;
  int64_t faults_max;
  const Change& change;

  void add(const char* statement, Params params) const {
    out.push_back(Command{statement, std::move(params)});
  }
  std::string what() const { return describe_conflict(change); }
  void event(const std::string& order_id, const std::string& from, const std::string& to,
             int64_t at_ms, const std::string& detail) const {
    add("insert_order_event", {order_id, from, to, num(at_ms), detail});
  }

  void operator()(const change::InsertDevice& c) const {
    add("insert_device", {c.id, c.key_hex, num(c.created_ms)});
    add("insert_device_seq", {c.id});
  }
  void operator()(const change::UpsertSlot& c) const {
    add("upsert_slot", {c.device, num(c.slot.slot), c.slot.product, num(c.slot.price_cents),
                        num(c.slot.capacity)});
  }
  void operator()(const change::InsertOrder& c) const {
    const Order& o = c.order;
    add("insert_order",
        {o.id, o.device, num(o.slot), o.token, num(o.price_cents), to_string(o.state),
         num(o.created_ms), num(o.updated_ms), num(o.reserve_deadline_ms),
         num(o.dispatch_expires_at_ms), optional_text(o.payment_id), o.reason,
         optional_text(o.idempotency_key), o.client});  // no creation event: derived
  }
  void operator()(const change::TransitionOrder& c) const {
    const Order& a = c.after;
    add("transition_order",
        {to_string(a.state), num(a.updated_ms), num(a.dispatch_expires_at_ms),
         optional_text(a.payment_id), a.reason, a.id, to_string(c.from), what()});
    event(a.id, to_string(c.from), to_string(a.state), a.updated_ms, c.detail);
  }
  void operator()(const change::MoveToken& c) const {
    add("move_token",
        {to_string(c.to), optional_text(c.order_id), c.token, to_string(c.from), what()});
  }
  void operator()(const change::InsertPoolTokens& c) const {
    if (c.tokens.empty()) return;
    add("insert_pool_tokens", {text_array(c.tokens), c.device, num(c.slot), c.restock_id});
  }
  void operator()(const change::PutRestock& c) const {
    const StoredRestock& r = c.restock;
    add("put_restock", {r.restock_id, r.device, num(r.slot), num(r.count),
                        std::string(r.minted ? "MINTED" : "REQUESTED"), num(c.at_ms)});
  }
  void operator()(const change::InsertPayment& c) const {
    const StoredPayment& p = c.payment;
    add("insert_payment", {p.payment_id, p.order_id, num(p.amount_cents), p.outcome, num(p.at_ms)});
  }
  void operator()(const change::InsertRefund& c) const {
    const StoredRefund& r = c.refund;
    add("insert_refund",
        {r.payment_id, r.order_id, num(r.amount_cents), r.reason, num(r.at_ms),
         std::string(to_string(r.state)), num(r.attempts), r.last_error, num(r.at_ms), r.device});
  }
  void operator()(const change::UpdateRefund& c) const {
    add("update_refund", {std::string(to_string(c.state)), num(c.attempts), c.last_error,
                          num(c.at_ms), c.payment_id, what()});
  }
  void operator()(const change::AdvanceDeviceSeq& c) const {
    // Seqs are stored as their 64-bit pattern, as in SQLite.
    add("advance_device_seq", {num(static_cast<int64_t>(c.to)), c.mac, c.device,
                               num(static_cast<int64_t>(c.from)), what()});
  }
  void operator()(const change::SwitchLedger& c) const {
    add("retire_ledger", {c.device, c.from, num(static_cast<int64_t>(c.from_seq)), num(c.at_ms)});
    add("switch_ledger", {c.to, c.device, c.from, num(static_cast<int64_t>(c.from_seq)), what()});
  }
  void operator()(const change::SetNextKey& c) const {
    add("set_next_key", {c.key_hex, c.device, what()});
  }
  void operator()(const change::PromoteNextKey& c) const {
    add("promote_next_key", {c.device, c.key_hex, what()});
  }
  void operator()(const change::DecommissionDevice& c) const {
    add("decommission_device", {num(c.at_ms), c.device, what()});
  }
  void operator()(const change::PutSnapshot& c) const {
    add("put_snapshot", {c.device, c.payload, num(c.at_ms)});
  }
  void operator()(const change::PutReconcileReport& c) const {
    add("put_reconcile_report", {c.device, c.report, num(c.at_ms)});
  }
  void operator()(const change::InsertFault& c) const {
    const StoredFault& f = c.fault;
    add("insert_fault", {f.device, f.code, f.message, num(f.slot), num(f.at_ms), num(faults_max)});
  }
  void operator()(const change::PutAccount& c) const {
    const StoredAccount& a = c.account;
    add("put_account", {a.name, std::string(to_string(a.role)), join_machines(a.machines),
                        a.password_hash, num(a.created_ms), num(a.disabled_ms)});
  }
  void operator()(const change::InsertApiToken& c) const {
    const StoredApiToken& t = c.token;
    add("insert_api_token",
        {t.id, t.account, t.sha256_hex, t.label, num(t.created_ms), num(t.expires_ms)});
  }
  void operator()(const change::RevokeApiToken& c) const {
    add("revoke_api_token", {num(c.at_ms), c.id, what()});
  }
  void operator()(const change::InsertAudit& c) const {
    const AuditEntry& e = c.entry;
    add("insert_audit",
        {num(e.at_ms), e.account, e.action, e.device, e.order_id, e.detail, e.peer});
  }
  void operator()(const change::Raw&) const {}
};

}  // namespace

void commands_of(const Change& change, int64_t faults_max, std::vector<Command>& out) {
  std::visit(PgCommands{out, faults_max, change}, change);
}

std::string text_array(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char ch : items[i]) {
      if (ch == '"' || ch == '\\') out += '\\';
      out += ch;
    }
    out += '"';
  }
  out += '}';
  return out;
}

}  // namespace vend::agent::pg
