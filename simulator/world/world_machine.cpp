#include "world/world_machine.hpp"

#include <sqlite3.h>

#include "vend/assert.hpp"
#include "vend/topics.hpp"

namespace vend::sim {

namespace {

// Every page of `from` into `to` in one step (SQLite's online backup).
Status copy_database(const std::string& from_path, const std::string& to_path) {
  sql::OpenOptions options;
  options.synchronous = sql::Sync::kOff;
  auto from = sql::Database::open(from_path, options);
  if (!from.ok()) return from.error();
  auto to = sql::Database::open(to_path, options);
  if (!to.ok()) return to.error();
  sqlite3_backup* backup = sqlite3_backup_init(to->handle(), "main", from->handle(), "main");
  if (backup == nullptr) {
    return make_error("sqlite_backup", to_path + ": " + sqlite3_errmsg(to->handle()));
  }
  int rc = sqlite3_backup_step(backup, -1);
  sqlite3_backup_finish(backup);
  if (rc != SQLITE_DONE) {
    return make_error("sqlite_backup", from_path + " -> " + to_path + ": " + sqlite3_errstr(rc));
  }
  return {};
}

}  // namespace

WorldMachine::WorldMachine(MachineSetup setup, InMemoryBus& bus, const Clock& clock, Random& random,
                           Logger& log, Trace& trace)
    : setup_(std::move(setup)),
      bus_(bus),
      random_(random),
      log_(log),
      trace_(trace),
      clock_(clock),
      mechanics_(clock_, random, setup_.mechanics) {}

WorldMachine::~WorldMachine() {
  core_.reset();
  client_.reset();
}

Status WorldMachine::boot() {
  fw::Identity identity{setup_.id, setup_.key, random_.id128()};
  auto ledger = fw::Ledger::open(setup_.ledger_path, identity, sql::Sync::kOff);
  if (!ledger.ok()) return ledger.error();
  ledger_.emplace(std::move(ledger).value());
  if (Status s = ledger_->sync_slots(setup_.slots); !s.ok()) return s;

  will_ = fw::DeviceCore::presence(identity, false, clock_.wall_ms());
  client_ = bus_.make_client(setup_.id, Will{will_.topic, will_.payload, 1, true});
  core_ = std::make_unique<fw::DeviceCore>(*ledger_, mechanics_.hal(), *client_, clock_, random_,
                                           log_, setup_.core);
  if (Status s = core_->boot(); !s.ok()) return s;
  client_->on_message([this](const Message& m) { on_command(m); });
  client_->on_connection([this](bool up) {
    if (core_) core_->on_connection(up);
  });
  Status connected = client_->connect();
  trace_.add(setup_.id + " boot" +
             (connected.ok() ? "" : " (offline: " + connected.error().code + ")"));
  return {};
}

void WorldMachine::crash(bool item_dropped) {
  bus_.kill_client(setup_.id);
  core_.reset();
  client_.reset();
  ledger_.reset();
  mechanics_.power_cut(item_dropped);
  trace_.add(setup_.id + " crash" + (item_dropped ? " (item dropped)" : ""));
}

void WorldMachine::tick() {
  if (core_) core_->tick();
}

int64_t WorldMachine::outbox_depth() {
  if (!ledger_) return 0;
  auto depth = ledger_->outbox_depth();
  return depth.ok() ? *depth : -1;
}

Status WorldMachine::copy_ledger_to(const std::string& path) const {
  return copy_database(setup_.ledger_path, path);
}

Status WorldMachine::restore_ledger_from(const std::string& path) {
  VEND_ASSERT(!up());
  return copy_database(path, setup_.ledger_path);
}

void WorldMachine::on_command(const Message& message) {
  if (!core_) return;
  fw::CommandOutcome outcome = core_->on_command(message.payload);
  trace_.add(setup_.id + " cmd " + outcome.type + " " + outcome.result +
             (outcome.reason.empty() ? "" : " " + outcome.reason));
}

}  // namespace vend::sim
