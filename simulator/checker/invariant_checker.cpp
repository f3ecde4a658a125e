#include "checker/invariant_checker.hpp"

#include <filesystem>
#include <unordered_set>

#include "checker/fleet_records.hpp"

namespace vend::sim {

namespace {
constexpr std::string_view kLedgerSuffix = ".ledger.db";
constexpr std::string_view kReplacedSuffix = ".replaced-";
}  // namespace

std::string ledger_file_name(const std::string& device) {
  return device + std::string(kLedgerSuffix);
}

FleetFiles fleet_files_in(const std::string& dir) {
  FleetFiles files;
  std::error_code ec;
  std::map<std::string, std::map<int, std::string>> replaced;  // device -> N -> path
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.size() > kLedgerSuffix.size() && name.ends_with(kLedgerSuffix)) {
      files.ledgers[name.substr(0, name.size() - kLedgerSuffix.size())] = entry.path().string();
      continue;
    }
    auto at = name.find(std::string(kLedgerSuffix) + std::string(kReplacedSuffix));
    if (at == std::string::npos || at == 0) continue;
    std::string n = name.substr(at + kLedgerSuffix.size() + kReplacedSuffix.size());
    if (n.empty() || n.size() > 6 || n.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    replaced[name.substr(0, at)][std::stoi(n)] = entry.path().string();
  }
  for (const auto& [device, copies] : replaced) {
    for (const auto& [n, path] : copies) files.replaced[device].push_back(path);
  }
  std::string agent = dir + "/" + kAgentDbName;
  if (std::filesystem::exists(agent, ec)) files.agent_db = agent;
  return files;
}

struct InvariantChecker::Data : detail::FleetRecords {};
struct InvariantChecker::Replaced {
  std::map<std::string, detail::LedgerRecords> records;  // path -> what it holds
};

InvariantChecker::InvariantChecker(FleetFiles files)
    : files_(std::move(files)), replaced_(std::make_unique<Replaced>()) {}
InvariantChecker::~InvariantChecker() = default;

void InvariantChecker::add_replaced_ledger(const std::string& device, const std::string& path) {
  files_.replaced[device].push_back(path);
}

// Newest first, so that what the oldest file recorded spent or finished
// (the first time it happened) is what stays.
Status InvariantChecker::merge_replaced(Data& data) {
  for (const auto& [device, paths] : files_.replaced) {
    auto current = data.ledgers.find(device);
    if (current == data.ledgers.end()) continue;
    for (auto path = paths.rbegin(); path != paths.rend(); ++path) {
      auto cached = replaced_->records.find(*path);
      if (cached == replaced_->records.end()) {
        auto db = database(*path);
        if (!db.ok()) return db.error();
        if (*db == nullptr) return make_error("sqlite_cantopen", *path + " is gone");
        detail::LedgerRecords records;
        if (Status s = detail::load_ledger(**db, records); !s.ok()) return s;
        if (Status s = detail::load_unreported_results(**db, records); !s.ok()) return s;
        open_.erase(*path);  // never written again: read once
        cached = replaced_->records.emplace(*path, std::move(records)).first;
      }
      detail::merge_replaced_ledger(cached->second, current->second);
    }
  }
  return {};
}

Result<sql::Database*> InvariantChecker::database(const std::string& path) {
  if (auto it = open_.find(path); it != open_.end()) return &it->second;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return static_cast<sql::Database*>(nullptr);
  sql::OpenOptions options;
  options.create = false;
  options.synchronous = sql::Sync::kOff;  // this connection never writes
  auto db = sql::Database::open(path, options);
  if (!db.ok()) return db.error();
  return &open_.emplace(path, std::move(db).value()).first->second;
}

Status InvariantChecker::load(Data& data) {
  for (const auto& [device, path] : files_.ledgers) {
    auto db = database(path);
    if (!db.ok()) return db.error();
    if (*db == nullptr) continue;
    if (Status s = detail::load_ledger(**db, data.ledgers[device]); !s.ok()) return s;
  }
  if (files_.agent_db.empty()) return {};
  auto db = database(files_.agent_db);
  if (!db.ok()) return db.error();
  if (*db == nullptr) return {};
  return detail::load_agent(**db, data.agent);
}

Result<std::vector<Violation>> InvariantChecker::check(
    CheckPhase phase, const std::map<std::string, int64_t>& rotations) {
  Data data;
  if (Status s = load(data); !s.ok()) return s.error();
  if (Status s = merge_replaced(data); !s.ok()) return s.error();
  std::vector<Violation> out;
  detail::check_ledger_rules(data, out);
  detail::check_rotations(data, rotations, out);
  detail::check_token_conservation(data, phase, out);
  detail::check_order_rules(data, phase, out);
  return out;
}

Result<std::vector<Violation>> InvariantChecker::check_promises(const Promises& promises,
                                                                CheckPhase phase) {
  std::vector<Violation> out;
  if (files_.agent_db.empty()) return out;
  auto db = database(files_.agent_db);
  if (!db.ok()) return db.error();
  if (*db == nullptr) return out;
  // One scan per table: a check runs after every step.
  auto ids = [&](const char* sql) -> Result<std::unordered_set<std::string>> {
    std::unordered_set<std::string> out;
    auto st = (*db)->prepare(sql);
    if (!st.ok()) return st.error();
    while (true) {
      auto row = st->step();
      if (!row.ok()) return row.error();
      if (!*row) return out;
      out.insert(st->column_text(0));
    }
  };
  auto orders = ids("SELECT id FROM orders");
  if (!orders.ok()) return orders.error();
  auto paid = ids("SELECT payment_id FROM payments");
  if (!paid.ok()) return paid.error();
  for (const auto& id : promises.orders) {
    if (!orders->count(id)) {
      out.push_back({"answered_order_lost", "order " + id + " was answered as created"});
    }
  }
  for (const auto& [order, payments] : promises.payments) {
    for (const auto& id : payments) {
      if (!paid->count(id)) {
        out.push_back({"answered_payment_lost",
                       detail::evidence({"payment ", id, " of ", order, " answered 2xx"})});
      }
    }
  }
  if (phase != CheckPhase::kSettled) return out;
  auto st = (*db)->prepare(
      "SELECT payment_id, state, attempts FROM refunds WHERE state != "
      "'DELIVERED' ORDER BY payment_id");
  if (!st.ok()) return st.error();
  while (true) {
    auto row = st->step();
    if (!row.ok()) return row.error();
    if (!*row) break;
    out.push_back({"refund_undelivered", "refund of " + st->column_text(0) + " is " +
                                             st->column_text(1) + " after " +
                                             std::to_string(st->column_int(2)) + " attempts"});
  }
  return out;
}

std::string format_violations(const std::vector<Violation>& violations) {
  std::string text;
  for (const auto& v : violations) text += v.invariant + ": " + v.evidence + "\n";
  return text;
}

}  // namespace vend::sim
