// The ledger's writes. Each public method is one transaction, and each state
// change the cloud must hear about writes its signed event to the outbox in
// that same transaction.
#include <algorithm>

#include "ledger_internal.hpp"
#include "vend/fw/ledger.hpp"

namespace vend::fw {

using namespace detail;

namespace {

Result<int> require_one(Result<int> changed, const std::string& what) {
  if (!changed.ok()) return changed;
  if (*changed != 1) return make_error("ledger_conflict", what);
  return changed;
}

Result<int64_t> next_position(sql::Database& db, int slot) {
  auto st = db.prepare("SELECT coalesce(max(position), 0) FROM tokens WHERE slot = ?");
  if (!st.ok()) return st.error();
  st->bind(1, slot);
  auto row = st->step();
  if (!row.ok()) return row.error();
  return st->column_int64(0) + 1;
}

}  // namespace

Result<uint64_t> Ledger::append_event_in_tx(const proto::EventBody& body, int64_t now_ms) {
  return append_signed_in_tx(body, now_ms, identity_.boot_id);
}

Result<uint64_t> Ledger::append_signed_in_tx(const proto::EventBody& body, int64_t ts_ms,
                                             const std::string& boot_id) {
  auto last = last_seq();
  if (!last.ok()) return last.error();
  auto ledger_id = stored_ledger_id(db_);  // the daemon may have started a new ledger
  if (!ledger_id.ok()) return ledger_id.error();
  identity_.ledger_id = std::move(ledger_id).value();
  proto::DeviceEvent event{identity_.device_id, *last + 1, boot_id, ts_ms, body,
                           identity_.ledger_id};
  std::string canonical = proto::encode_canonical(event);
  std::string payload = proto::encode(event, crypto::sign(identity_.key, canonical));
  if (payload.size() > proto::kMaxPayloadBytes) {  // the cloud would refuse it on every resend
    return make_error("oversize_event", std::string(proto::type_name(body)) + " event of " +
                                            std::to_string(payload.size()) + " bytes exceeds " +
                                            std::to_string(proto::kMaxPayloadBytes));
  }
  auto bumped = run(db_, "UPDATE meta SET value = ? WHERE key = 'last_seq'",
                    [&](sql::Statement& st) { st.bind(1, static_cast<int64_t>(event.seq)); });
  if (!bumped.ok()) return bumped.error();
  auto inserted = run(db_, "INSERT INTO outbox(seq, type, payload, created_ms) VALUES (?,?,?,?)",
                      [&](sql::Statement& st) {
                        st.bind(1, static_cast<int64_t>(event.seq))
                            .bind(2, proto::type_name(body))
                            .bind(3, payload)
                            .bind(4, ts_ms);
                      });
  if (!inserted.ok()) return inserted.error();
  return event.seq;
}

Result<uint64_t> Ledger::append_event(const proto::EventBody& body, int64_t now_ms) {
  return in_transaction<uint64_t>(db_, [&] { return append_event_in_tx(body, now_ms); });
}

Status Ledger::record_pending_restock(const std::string& restock_id, int slot, int count,
                                      int64_t now_ms) {
  auto r = run(db_,
               "INSERT INTO restocks(restock_id, slot, count, state, created_ms) "
               "VALUES (?, ?, ?, 'PENDING', ?) ON CONFLICT(restock_id) DO NOTHING",
               [&](sql::Statement& st) {
                 st.bind(1, restock_id).bind(2, slot).bind(3, count).bind(4, now_ms);
               });
  if (!r.ok()) return r.error();
  return {};
}

Result<proto::TokensMinted> Ledger::confirm_restock(const std::string& restock_id, int slot,
                                                    int count, int64_t now_ms, Random& random) {
  if (count < 1 || count > proto::kMaxRestockCount) {
    return make_error("bad_count",
                      "restock count must be 1.." + std::to_string(proto::kMaxRestockCount));
  }
  return in_transaction<proto::TokensMinted>(db_, [&]() -> Result<proto::TokensMinted> {
    auto prior = db_.prepare("SELECT state FROM restocks WHERE restock_id = ?");
    if (!prior.ok()) return prior.error();
    prior->bind(1, restock_id);
    auto found = prior->step();
    if (!found.ok()) return found.error();
    if (*found && prior->column_text(0) == "CONFIRMED") {
      return make_error("already_confirmed", "restock '" + restock_id + "' was already loaded");
    }
    auto row = this->slot(slot);
    if (!row.ok()) return row.error();
    if (!row->has_value()) return make_error("unknown_slot", "slot " + std::to_string(slot));
    const SlotRow& s = **row;
    if (s.physical_count + count > s.capacity) {
      return make_error("over_capacity", "slot " + std::to_string(slot) + " holds " +
                                             std::to_string(s.physical_count) + " of " +
                                             std::to_string(s.capacity) + "; cannot load " +
                                             std::to_string(count));
    }
    auto position = next_position(db_, slot);
    if (!position.ok()) return position.error();
    auto insert = db_.prepare(
        "INSERT INTO tokens(token, slot, state, restock_id, position, minted_ms) "
        "VALUES (?, ?, 'AVAILABLE', ?, ?, ?)");
    if (!insert.ok()) return insert.error();
    proto::TokensMinted minted{restock_id, slot, {}, s.physical_count + count};
    for (int i = 0; i < count; ++i) {
      minted.tokens.push_back(random.id128());
      auto r = insert->bind(1, minted.tokens.back())
                   .bind(2, slot)
                   .bind(3, restock_id)
                   .bind(4, *position + i)
                   .bind(5, now_ms)
                   .run();
      if (!r.ok()) return r.error();
    }
    auto up = run(db_, "UPDATE slots SET physical_count = physical_count + ? WHERE slot = ?",
                  [&](sql::Statement& st) { st.bind(1, count).bind(2, slot); });
    if (!up.ok()) return up.error();
    auto rs =
        run(db_,
            "INSERT INTO restocks(restock_id, slot, count, state, created_ms, confirmed_ms) "
            "VALUES (?, ?, ?, 'CONFIRMED', ?, ?) ON CONFLICT(restock_id) DO UPDATE SET "
            "state = 'CONFIRMED', count = excluded.count, slot = excluded.slot, "
            "confirmed_ms = excluded.confirmed_ms",
            [&](sql::Statement& st) {
              st.bind(1, restock_id).bind(2, slot).bind(3, count).bind(4, now_ms).bind(5, now_ms);
            });
    if (!rs.ok()) return rs.error();
    auto seq = append_event_in_tx(minted, now_ms);
    if (!seq.ok()) return seq.error();
    return minted;
  });
}

Status Ledger::accept_dispense(const proto::DispenseCommand& c, int64_t now_ms) {
  auto r = in_transaction<int>(db_, [&]() -> Result<int> {
    auto consumed = require_one(
        run(db_,
            "UPDATE tokens SET state = 'CONSUMED', order_id = ? "
            "WHERE token = ? AND slot = ? AND state = 'AVAILABLE'",
            [&](sql::Statement& st) { st.bind(1, c.order_id).bind(2, c.token).bind(3, c.slot); }),
        "token " + c.token + " is not available in slot " + std::to_string(c.slot));
    if (!consumed.ok()) return consumed;
    return run(db_,
               "INSERT INTO dispenses(order_id, slot, token, state, expires_at_ms, "
               "token_consumed, accepted_ms, updated_ms) VALUES (?, ?, ?, 'ACCEPTED', ?, 1, ?, ?)",
               [&](sql::Statement& st) {
                 st.bind(1, c.order_id)
                     .bind(2, c.slot)
                     .bind(3, c.token)
                     .bind(4, c.expires_at_ms)
                     .bind(5, now_ms)
                     .bind(6, now_ms);
               });
  });
  if (!r.ok()) return r.error();
  return {};
}

Status Ledger::mark_motor_running(const std::string& order_id, int64_t now_ms) {
  auto r = require_one(run(db_,
                           "UPDATE dispenses SET state = 'MOTOR_RUNNING', updated_ms = ? "
                           "WHERE order_id = ? AND state = 'ACCEPTED'",
                           [&](sql::Statement& st) { st.bind(1, now_ms).bind(2, order_id); }),
                       "order " + order_id + " is not ACCEPTED");
  if (!r.ok()) return r.error();
  return {};
}

Result<uint64_t> Ledger::mark_motor_running_announced(const DispenseRow& d, int64_t now_ms) {
  return in_transaction<uint64_t>(db_, [&]() -> Result<uint64_t> {
    if (auto s = mark_motor_running(d.order_id, now_ms); !s.ok()) return s.error();
    return append_event_in_tx(proto::DispenseStarted{d.order_id, d.slot, d.token}, now_ms);
  });
}

}  // namespace vend::fw
