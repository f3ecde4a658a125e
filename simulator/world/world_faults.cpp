#include "world/world_faults.hpp"

#include "vend/protocol.hpp"
#include "vend/topics.hpp"

namespace vend::sim {

namespace {
constexpr int64_t kMinFaultSteps = 5;
constexpr int64_t kMaxFaultSteps = 400;
}  // namespace

WorldFaults::WorldFaults(const FaultRates& rates, Random& random, InMemoryBus& bus,
                         std::vector<std::unique_ptr<WorldMachine>>& machines, WorldAgents& agents,
                         Trace& trace)
    : rates_(rates),
      random_(random),
      bus_(bus),
      machines_(machines),
      agents_(agents),
      trace_(trace) {
  bus_.set_filter([this](const InMemoryBus::Envelope& e) { return filter(e); });
}

namespace {

// Presence relies on MQTT's ordered delivery per topic (a will, then the next
// session's online), so status messages are never delayed or reordered here;
// the race of a late will is its own fault (presence_race).
bool is_status(const Message& m) {
  auto topic = topics::parse_device_topic(m.topic);
  return topic.ok() && topic->kind == topics::DeviceTopic::Kind::kStatus;
}

bool any_status_pending(const InMemoryBus& bus) {
  for (const auto& e : bus.pending_snapshot()) {
    if (is_status(e.message)) return true;
  }
  return false;
}

}  // namespace

InMemoryBus::Fault WorldFaults::filter(const InMemoryBus::Envelope& e) {
  if (!enabled_ || is_status(e.message)) return InMemoryBus::Fault::deliver();
  std::string what = e.from + "->" + e.to;
  if (random_.chance(rates_.drop)) {
    trace_.add("bus drop " + what);
    disturb(e.from), disturb(e.to);
    return InMemoryBus::Fault::drop();
  }
  if (random_.chance(rates_.duplicate)) {
    trace_.add("bus duplicate " + what);
    disturb(e.from), disturb(e.to);
    return InMemoryBus::Fault::duplicate();
  }
  if (random_.chance(rates_.delay)) {
    auto steps = static_cast<uint64_t>(random_.range(1, rates_.max_delay_steps));
    trace_.add("bus delay " + what + " " + std::to_string(steps));
    disturb(e.from), disturb(e.to);
    return InMemoryBus::Fault::delay(steps);
  }
  if (rates_.command_lost > 0 && lose_command(e)) return InMemoryBus::Fault::drop();
  return InMemoryBus::Fault::deliver();
}

// The first dispense command of an order, delivered to its machine, is lost
// at the command_lost rate: the broker accepted it (the agent's publish
// succeeded) and the machine never gets it.
bool WorldFaults::lose_command(const InMemoryBus::Envelope& e) {
  auto topic = topics::parse_device_topic(e.message.topic);
  if (!topic.ok() || topic->kind != topics::DeviceTopic::Kind::kCmd || topic->device != e.to) {
    return false;
  }
  auto command = proto::decode_command(e.message.payload);
  if (!command.ok()) return false;
  const auto* dispense = std::get_if<proto::DispenseCommand>(&command->message);
  if (dispense == nullptr || lost_orders_.count(dispense->order_id)) return false;
  if (!random_.chance(rates_.command_lost)) return false;
  lost_orders_.insert(dispense->order_id);
  ++counters_.commands_lost;  // another order's lost command disturbs no other
  // Watched only when nothing else is wrong: no other fault of the machine
  // or of an agent under way, no agent clock stepped (its commands expire
  // early or late).
  // A command stamped while an agent clock was stepped or skewed expires
  // early or late: its last change must be older than a command's life
  // (the world's dispatch TTL plus skew, world.cpp, rounded up).
  constexpr int64_t kCommandLifeMs = 15'000;
  bool calm = !faulted_.count(e.to) && faulted_agents_.empty() && stepped_clocks_.empty() &&
              copied_ledgers_.empty() &&
              (agent_clock_changed_ms_ < 0 || now_ms() - agent_clock_changed_ms_ > kCommandLifeMs);
  if (calm) lost_.push_back({dispense->order_id, e.to, step_, disturbances(e.to)});
  trace_.add("fault command lost " + e.to + " order " + dispense->order_id);
  return true;
}

int64_t WorldFaults::disturbances(const std::string& device) const {
  auto it = disturbed_.find(device);
  return agents_disturbed_ + (it == disturbed_.end() ? 0 : it->second);
}

Status WorldFaults::step(int64_t step) {
  step_ = step;
  for (auto* due : {&heals_, &restore_boots_}) {
    while (!due->empty() && due->begin()->first <= step) {
      Heal heal = std::move(due->begin()->second);
      due->erase(due->begin());
      if (Status s = heal(); !s.ok()) return s;
    }
  }
  if (!enabled_) return {};
  if (random_.chance(rates_.reorder) && !any_status_pending(bus_)) {
    bus_.reorder(random_);
    trace_.add("bus reorder");  // loses nothing: no disturbance
  }
  if (random_.chance(rates_.partition)) {
    if (WorldMachine* m = pick_healthy_machine()) partition(*m);
  }
  if (random_.chance(rates_.offline)) {
    if (WorldMachine* m = pick_healthy_machine()) offline(*m);
  }
  if (random_.chance(rates_.machine_crash)) {
    if (WorldMachine* m = pick_healthy_machine()) crash_machine(*m);
  }
  if (random_.chance(rates_.clock_skew)) {
    skew_clock(*machines_[random_.range(0, machines_.size() - 1)]);
  }
  if (random_.chance(rates_.agent_clock_step)) step_agent_clock();
  if (rates_.ledger_restore > 0 && random_.chance(rates_.ledger_restore)) {
    if (WorldMachine* m = pick_healthy_machine()) copy_ledger(*m);
  }
  if (!agents_.clustered()) {
    if (agents_.at(0).up() && random_.chance(rates_.agent_crash)) crash_agent(agents_.at(0));
    return {};
  }
  instance_faults();
  return {};
}

Status WorldFaults::heal_all() {
  enabled_ = false;
  while (!heals_.empty()) {
    Heal heal = std::move(heals_.begin()->second);
    heals_.erase(heals_.begin());
    if (Status s = heal(); !s.ok()) return s;
  }
  for (auto& m : machines_) m->clock().set_skew(0);
  for (size_t i = 0; i < agents_.size(); ++i) agents_.clock_of(i).set_skew(0);
  trace_.add("faults healed");
  return {};
}

WorldMachine* WorldFaults::pick_healthy_machine() {
  WorldMachine* m = machines_[random_.range(0, machines_.size() - 1)].get();
  return m->up() && !faulted_.count(m->id()) ? m : nullptr;
}

void WorldFaults::partition(WorldMachine& m) {
  std::string id = m.id();
  faulted_.insert(id);
  disturb(id);
  bus_.partition(id, true);
  ++counters_.partitions;
  trace_.add("fault partition " + id);
  if (random_.chance(rates_.presence_race)) {
    schedule(step_ + random_.range(kMinFaultSteps, kMaxFaultSteps), [this, &m] {
      bus_.partition(m.id(), false);
      bus_.disconnect(m.id(), false);      // the old connection: its will comes later
      bool back = bus_.reconnect(m.id());  // a new connection takes the session over
      faulted_.erase(m.id());
      disturb(m.id());
      trace_.add("heal partition " + m.id() + " with a late will" +
                 (back ? "" : " (not reconnected)"));
      const Message& will = m.will();
      schedule(step_ + random_.range(1, 10), [this, will] { return publish_late_will(will); });
      return Status{};
    });
    return;
  }
  schedule(step_ + random_.range(kMinFaultSteps, kMaxFaultSteps), [this, id] {
    bus_.disconnect(id);  // the broker's keep-alive gives up
    bus_.partition(id, false);
    bool back = bus_.reconnect(id);
    faulted_.erase(id);
    disturb(id);
    trace_.add("heal partition " + id + (back ? "" : " (not reconnected)"));
    return Status{};
  });
}

void WorldFaults::offline(WorldMachine& m) {
  const std::string& id = m.id();
  faulted_.insert(id);
  disturb(id);
  bus_.disconnect(id);
  ++counters_.offline;
  trace_.add("fault offline " + id);
  schedule(step_ + random_.range(kMinFaultSteps, kMaxFaultSteps), [this, id] {
    bool back = bus_.reconnect(id);
    faulted_.erase(id);
    disturb(id);
    trace_.add("heal offline " + id + (back ? "" : " (not reconnected)"));
    return Status{};
  });
}

void WorldFaults::crash_machine(WorldMachine& m) {
  faulted_.insert(m.id());
  disturb(m.id());
  m.crash(random_.chance(0.5));
  ++counters_.machine_crashes;
  WorldMachine* machine = &m;
  schedule(step_ + random_.range(kMinFaultSteps, kMaxFaultSteps), [this, machine] {
    faulted_.erase(machine->id());
    disturb(machine->id());
    return machine->boot();
  });
}

void WorldFaults::maybe_crash_agent(double rate_factor) {
  if (!enabled_) return;
  if (!agents_.clustered()) {
    WorldAgent& agent = agents_.at(0);
    if (agent.up() && random_.chance(rates_.agent_crash * rate_factor)) crash_agent(agent);
    return;
  }
  if (!random_.chance(rates_.agent_crash * rate_factor)) return;
  if (WorldAgent* a = pick_healthy_instance()) crash_agent(*a);
}

bool WorldFaults::maybe_crash_in_call(WorldAgent& agent, agent::CallPoint point,
                                      const std::string& call, double rate_factor) {
  if (!enabled_ || faulted_agents_.count(&agent)) return false;
  if (!random_.chance(rates_.agent_crash * rate_factor)) return false;
  trace_.add("fault agent crash in " + call +
             (point == agent::CallPoint::kCommitted ? ": committed, its next step not run"
                                                    : ": answered, the answer not received"));
  crash_agent(agent);
  return true;
}

void WorldFaults::crash_agent(WorldAgent& agent) {
  agent.crash();
  disturb_agents();
  ++counters_.agent_crashes;
  faulted_agents_.insert(&agent);
  WorldAgent* a = &agent;
  schedule(step_ + random_.range(kMinFaultSteps, kMaxFaultSteps / 2), [this, a] {
    faulted_agents_.erase(a);
    disturb_agents();
    return a->start();
  });
}

// ---- several agents ------------------------------------------------------------

namespace {
constexpr int64_t kMinInstanceFaultSteps = 50;
constexpr int64_t kMaxInstanceFaultSteps = 600;
}  // namespace

WorldAgent* WorldFaults::pick_healthy_instance() {
  WorldAgent* a = &agents_.at(static_cast<size_t>(random_.range(0, agents_.size() - 1)));
  return a->started() && !faulted_agents_.count(a) ? a : nullptr;
}

void WorldFaults::instance_faults() {
  if (random_.chance(rates_.agent_crash)) {
    if (WorldAgent* a = pick_healthy_instance()) crash_agent(*a);
  }
  if (random_.chance(rates_.agent_pause)) {
    if (WorldAgent* a = pick_healthy_instance()) pause_instance(*a);
  }
  if (random_.chance(rates_.agent_db_partition)) {
    if (WorldAgent* a = pick_healthy_instance()) partition_instance(*a);
  }
  if (random_.chance(rates_.agent_clock_skew)) {
    WorldAgent& a = agents_.at(static_cast<size_t>(random_.range(0, agents_.size() - 1)));
    int64_t skew = random_.range(-rates_.max_skew_ms, rates_.max_skew_ms);
    a.own_clock().set_skew(skew);
    disturb_agents();
    agent_clock_changed_ms_ = now_ms();
    trace_.add("fault skew agent " + a.instance_id() + " " + std::to_string(skew) + " ms");
  }
}

void WorldFaults::pause_instance(WorldAgent& agent) {
  agent.pause();
  disturb_agents();
  ++counters_.agent_pauses;
  faulted_agents_.insert(&agent);
  WorldAgent* a = &agent;
  schedule(step_ + random_.range(kMinInstanceFaultSteps, kMaxInstanceFaultSteps), [this, a] {
    faulted_agents_.erase(a);
    disturb_agents();
    a->resume();
    return Status{};
  });
}

void WorldFaults::partition_instance(WorldAgent& agent) {
  SharedDatabase& db = *agents_.database();
  db.set_partitioned(agent.instance_id(), true);
  disturb_agents();
  ++counters_.agent_db_partitions;
  faulted_agents_.insert(&agent);
  trace_.add("fault db partition " + agent.instance_id());
  WorldAgent* a = &agent;
  schedule(step_ + random_.range(kMinInstanceFaultSteps, kMaxInstanceFaultSteps), [this, a, &db] {
    faulted_agents_.erase(a);
    db.set_partitioned(a->instance_id(), false);
    disturb_agents();
    trace_.add("heal db partition " + a->instance_id());
    return Status{};
  });
}

Status WorldFaults::publish_late_will(const Message& will) {
  if (!late_wills_) {
    late_wills_ = bus_.make_client("sim-late-wills", std::nullopt, true);
    if (Status s = late_wills_->connect(); !s.ok()) return s;
  }
  trace_.add("late will " + will.topic);
  disturb_agents();
  Message m = will;
  m.retained = true;
  return late_wills_->publish(m);
}

void WorldFaults::skew_clock(WorldMachine& m) {
  int64_t skew = random_.range(-rates_.max_skew_ms, rates_.max_skew_ms);
  m.clock().set_skew(skew);
  disturb(m.id());
  ++counters_.skews;
  trace_.add("fault skew " + m.id() + " " + std::to_string(skew) + " ms");
}

// An NTP step or a hand-set clock: the agent's wall clock jumps and, a while
// later, jumps back. Monotonic time goes on; the machines' clocks are untouched.
void WorldFaults::step_agent_clock() {
  size_t i = static_cast<size_t>(random_.range(0, agents_.size() - 1));
  if (!stepped_clocks_.insert(i).second) return;  // one step at a time per agent
  int64_t step = random_.range(1000, rates_.max_agent_step_ms) * (random_.chance(0.5) ? 1 : -1);
  SkewedClock& clock = agents_.clock_of(i);
  clock.set_skew(clock.skew() + step);
  disturb_agents();
  agent_clock_changed_ms_ = now_ms();
  ++counters_.agent_clock_steps;
  std::string name = agents_.clustered() ? agents_.at(i).instance_id() : std::string("agent");
  trace_.add("fault step clock " + name + " " + std::to_string(step) + " ms");
  schedule(step_ + random_.range(kMinFaultSteps, kMaxFaultSteps), [this, i, step, name] {
    SkewedClock& c = agents_.clock_of(i);
    c.set_skew(c.skew() - step);
    stepped_clocks_.erase(i);
    disturb_agents();
    agent_clock_changed_ms_ = now_ms();
    trace_.add("heal step clock " + name);
    return Status{};
  });
}

}  // namespace vend::sim
