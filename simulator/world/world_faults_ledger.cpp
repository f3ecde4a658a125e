// The ledger_restore fault of WorldFaults: a machine's ledger file is copied
// and, a while later, the machine loses power and boots on that copy, as
// after an SD card restored from a backup or a power loss at
// synchronous=normal that kept only an older state of the file.
#include "world/world_faults.hpp"

namespace vend::sim {

namespace {
constexpr int64_t kMaxCopyAgeSteps = 600;  // the copy is 1..this many steps old
constexpr int64_t kBusyRetrySteps = 20;    // the machine under another fault: later
}  // namespace

void WorldFaults::copy_ledger(WorldMachine& m) {
  if (!copied_ledgers_.insert(m.id()).second) return;  // one restore pending at a time
  const std::string copy = m.ledger_path() + ".copy";
  if (Status s = m.copy_ledger_to(copy); !s.ok()) {
    copied_ledgers_.erase(m.id());
    trace_.add("fault ledger copy " + m.id() + " failed: " + s.error().to_string());
    return;
  }
  trace_.add("fault ledger copy " + m.id());
  WorldMachine* machine = &m;
  schedule(step_ + random_.range(1, kMaxCopyAgeSteps),
           [this, machine] { return restore_ledger(*machine); });
}

// Power lost, the file replaced by the copy, power back restore_down_min_steps
// up to twice that later. A machine under another fault is restored once that
// has healed.
Status WorldFaults::restore_ledger(WorldMachine& m) {
  const std::string id = m.id();
  if (!enabled_) {
    copied_ledgers_.erase(id);
    trace_.add("ledger restore of " + id + " not done: faults healed");
    return {};
  }
  if (!m.up() || faulted_.count(id)) {
    WorldMachine* machine = &m;
    schedule(step_ + kBusyRetrySteps, [this, machine] { return restore_ledger(*machine); });
    return {};
  }
  faulted_.insert(id);
  m.crash(random_.chance(0.5));
  disturb(id);
  int n = ++replaced_ledgers_[id];
  const std::string replaced = m.ledger_path() + ".replaced-" + std::to_string(n);
  if (Status s = m.copy_ledger_to(replaced); !s.ok()) return s;
  if (on_replaced_) on_replaced_(id, replaced);
  if (Status s = m.restore_ledger_from(m.ledger_path() + ".copy"); !s.ok()) return s;
  copied_ledgers_.erase(id);
  ++counters_.ledger_restores;
  trace_.add("fault ledger restored " + id + " (the file it replaced kept as " +
             replaced.substr(replaced.rfind('/') + 1) + ")");
  WorldMachine* machine = &m;
  int64_t down = random_.range(rates_.restore_down_min_steps, 2 * rates_.restore_down_min_steps);
  restore_boots_.emplace(step_ + down, [this, machine] {
    faulted_.erase(machine->id());
    disturb(machine->id());
    return machine->boot();
  });
  return {};
}

}  // namespace vend::sim
