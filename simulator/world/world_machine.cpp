#include "world/world_machine.hpp"

#include "vend/topics.hpp"

namespace vend::sim {

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

void WorldMachine::on_command(const Message& message) {
  if (!core_) return;
  fw::CommandOutcome outcome = core_->on_command(message.payload);
  trace_.add(setup_.id + " cmd " + outcome.type + " " + outcome.result +
             (outcome.reason.empty() ? "" : " " + outcome.reason));
}

}  // namespace vend::sim
