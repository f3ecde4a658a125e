// Acknowledgements, and the new ledger a regression starts.
#include <utility>
#include <vector>

#include "ledger_internal.hpp"
#include "vend/fw/ledger.hpp"

namespace vend::fw {

using namespace detail;

namespace {

Result<std::optional<std::string>> outbox_payload(sql::Database& db, uint64_t seq) {
  auto st = db.prepare("SELECT payload FROM outbox WHERE seq = ?");
  if (!st.ok()) return st.error();
  st->bind(1, static_cast<int64_t>(seq));
  auto row = st->step();
  if (!row.ok()) return row.error();
  if (!*row) return std::optional<std::string>();
  return std::optional<std::string>(st->column_text(0));
}

// The cloud's word on seq `upto` against this ledger's own event there.
// Error `ledger_regressed` when they are not the same event.
Status check_acked_event(sql::Database& db, uint64_t upto, const std::string& upto_mac,
                         uint64_t last, uint64_t acked) {
  if (upto > last) {
    return make_error("ledger_regressed", "ack up to " + std::to_string(upto) +
                                              " but the last event is " + std::to_string(last));
  }
  if (upto_mac.empty() || upto <= acked) return {};  // nothing to compare, or nothing to delete
  auto payload = outbox_payload(db, upto);
  if (!payload.ok()) return payload.error();
  if (!payload->has_value()) {
    return make_error("ledger_conflict", "seq " + std::to_string(upto) +
                                             " is past the acked seq but not in the outbox");
  }
  auto held = proto::decode_event(**payload);
  if (!held.ok()) return make_error("ledger_corrupt", "outbox seq " + std::to_string(upto));
  if (held->mac != upto_mac) {
    return make_error("ledger_regressed", "the cloud processed another event " +
                                              std::to_string(upto) + " than the one held here");
  }
  return {};
}

// The held events a new ledger carries on: facts (results, tokens, faults).
// Snapshots are views of a moment (the cloud asks a new ledger for a full
// one) and events_unavailable speaks of the old ledger's seqs.
bool carried_over(const proto::EventBody& body) {
  return !std::holds_alternative<proto::Snapshot>(body) &&
         !std::holds_alternative<proto::EventsUnavailable>(body);
}

Result<std::vector<proto::DeviceEvent>> held_events(sql::Database& db) {
  std::vector<proto::DeviceEvent> events;
  auto st = db.prepare("SELECT seq, payload FROM outbox ORDER BY seq");
  if (!st.ok()) return st.error();
  while (true) {
    auto more = st->step();
    if (!more.ok()) return more.error();
    if (!*more) break;
    auto decoded = proto::decode_event(st->column_text(1));
    if (!decoded.ok()) {
      return make_error("ledger_corrupt", "outbox seq " + std::to_string(st->column_int64(0)) +
                                              ": " + decoded.error().message);
    }
    if (carried_over(decoded->message.body)) events.push_back(std::move(decoded->message));
  }
  return events;
}

}  // namespace

Result<int> Ledger::acknowledge(uint64_t upto_seq, const std::string& upto_mac) {
  return in_transaction<int>(db_, [&]() -> Result<int> {
    auto last = last_seq();
    if (!last.ok()) return last.error();
    auto acked = acked_seq();
    if (!acked.ok()) return acked.error();
    if (auto s = check_acked_event(db_, upto_seq, upto_mac, *last, *acked); !s.ok()) {
      return s.error();
    }
    auto deleted = run(db_, "DELETE FROM outbox WHERE seq <= ?",
                       [&](sql::Statement& st) { st.bind(1, static_cast<int64_t>(upto_seq)); });
    if (!deleted.ok()) return deleted;
    auto up = run(db_, "UPDATE meta SET value = max(value, ?) WHERE key = 'acked_seq'",
                  [&](sql::Statement& st) { st.bind(1, static_cast<int64_t>(upto_seq)); });
    if (!up.ok()) return up.error();
    return deleted;
  });
}

Status Ledger::check_cloud_view(uint64_t seq, const std::string& mac) {
  auto last = last_seq();
  if (!last.ok()) return last.error();
  auto acked = acked_seq();
  if (!acked.ok()) return acked.error();
  return check_acked_event(db_, seq, mac, *last, *acked);
}

Result<uint64_t> Ledger::start_new_ledger(const std::string& ledger_id, const proto::Fault& why,
                                          int64_t now_ms) {
  const std::string old_id = identity_.ledger_id;
  auto last = in_transaction<uint64_t>(db_, [&]() -> Result<uint64_t> {
    auto held = held_events(db_);
    if (!held.ok()) return held.error();
    auto named = run(db_, "UPDATE ledger_identity SET ledger_id = ? WHERE one = 1",
                     [&](sql::Statement& st) { st.bind(1, ledger_id); });
    if (!named.ok()) return named.error();
    auto kept = run(db_, "INSERT OR IGNORE INTO previous_ledgers(ledger_id) VALUES (?)",
                    [&](sql::Statement& st) { st.bind(1, old_id); });
    if (!kept.ok()) return kept.error();
    if (auto s = db_.exec("DELETE FROM outbox; UPDATE meta SET value = 0 "
                          "WHERE key IN ('last_seq', 'acked_seq')");
        !s.ok()) {
      return s.error();
    }
    // Each held event again, in order, under the new id and seqs from 1;
    // its boot and time stay those of the session that wrote it.
    for (const proto::DeviceEvent& event : *held) {
      auto seq = append_signed_in_tx(event.body, event.ts_ms, event.boot_id);
      if (!seq.ok()) return seq.error();
    }
    return append_event_in_tx(why, now_ms);
  });
  if (!last.ok()) identity_.ledger_id = old_id;  // rolled back: still the old ledger
  return last;
}

Result<bool> Ledger::was_ledger(const std::string& ledger_id) {
  auto st = db_.prepare("SELECT 1 FROM previous_ledgers WHERE ledger_id = ?");
  if (!st.ok()) return st.error();
  st->bind(1, ledger_id);
  auto row = st->step();
  if (!row.ok()) return row.error();
  return *row;
}

}  // namespace vend::fw
