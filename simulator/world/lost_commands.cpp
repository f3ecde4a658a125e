#include "world/lost_commands.hpp"

#include <filesystem>

namespace vend::sim {

namespace {

// The first column of the first row, "" when there is none.
Result<std::string> first_text(sql::Database& db, const char* query, const std::string& key) {
  auto st = db.prepare(query);
  if (!st.ok()) return st.error();
  st->bind(1, key);
  auto row = st->step();
  if (!row.ok()) return row.error();
  return *row ? st->column_text(0) : std::string();
}

}  // namespace

void LostCommandWatch::add(std::vector<LostCommand> lost) {
  for (auto& l : lost) watched_.push_back(std::move(l));
}

Result<sql::Database*> LostCommandWatch::database(const std::string& file) {
  if (auto it = open_.find(file); it != open_.end()) return &it->second;
  std::error_code ec;
  if (!std::filesystem::exists(dir_ + "/" + file, ec)) return static_cast<sql::Database*>(nullptr);
  sql::OpenOptions options;
  options.create = false;
  options.synchronous = sql::Sync::kOff;  // never writes
  auto db = sql::Database::open(dir_ + "/" + file, options);
  if (!db.ok()) return db.error();
  return &open_.emplace(file, std::move(db).value()).first->second;
}

Result<std::string> LostCommandWatch::order_state(const std::string& order_id) {
  auto db = database(kAgentDbName);
  if (!db.ok()) return db.error();
  if (*db == nullptr) return std::string();
  return first_text(**db, "SELECT state FROM orders WHERE id = ?", order_id);
}

Result<std::string> LostCommandWatch::dispense_state(const LostCommand& lost) {
  auto db = database(ledger_file_name(lost.device));
  if (!db.ok()) return db.error();
  if (*db == nullptr) return std::string();
  return first_text(**db, "SELECT state FROM dispenses WHERE order_id = ?", lost.order_id);
}

Result<std::vector<Violation>> LostCommandWatch::check(const WorldFaults& faults) {
  std::vector<Violation> out;
  std::vector<LostCommand> still;
  for (auto& lost : watched_) {
    if (faults.disturbances(lost.device) != lost.disturbances) continue;  // excused
    auto state = order_state(lost.order_id);
    if (!state.ok()) return state.error();
    if (state->empty() || *state == "PAID" || *state == "DISPATCHED" || *state == "FAILED") {
      still.push_back(std::move(lost));
      continue;
    }
    if (*state == "COMPLETED") ++completed_;
    if (*state != "REFUNDED" && *state != "NEEDS_REVIEW") continue;
    auto tried = dispense_state(lost);
    if (!tried.ok()) return tried.error();
    if (*tried == "FAILED" || *tried == "UNCERTAIN") continue;  // the machine tried it
    out.push_back({"lost_command_not_resent",
                   "order " + lost.order_id + " on " + lost.device +
                       ": its dispense command was lost after the broker accepted it (step " +
                       std::to_string(lost.step) + "); machine and agents undisturbed since, " +
                       "it ended " + *state + " with the machine's dispense " +
                       (tried->empty() ? std::string("never recorded") : *tried)});
  }
  watched_ = std::move(still);
  return out;
}

}  // namespace vend::sim
