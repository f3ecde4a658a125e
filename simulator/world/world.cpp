// The deterministic world: set-up, the step loop, settling, and the checks.
#include "world/world.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "checker/invariant_checker.hpp"
#include "world/lost_commands.hpp"
#include "world/trace.hpp"
#include "world/work_dir.hpp"
#include "world/world_agents.hpp"
#include "world/world_faults.hpp"
#include "world/world_flood.hpp"
#include "world/world_machine.hpp"
#include "world/world_workload.hpp"

namespace vend::sim {

namespace {

constexpr int64_t kSettleAdvanceMs = 50;
constexpr int64_t kSettleMaxMs = 10 * 60 * 1000;
constexpr int64_t kSettleQuietCheckEvery = 20;
// Right after a customer's answer is the crash point that matters most
// (nothing answered may be lost), and customers answer far less often than
// steps happen: crashes there are this much likelier than at other points.
constexpr double kAfterAnswerCrashFactor = 20;
// Inside a customer's call: after its commit, before its next step (a
// payment's dispense) or its answer; and with the answer given, not received.
constexpr double kInCallCrashFactor = 20;

agent::AgentOptions world_agent_options(const WorldOptions& options) {
  agent::AgentOptions o;
  o.command_resend_ms = options.command_resend_ms;
  o.command_resend_max_ms = std::max(o.command_resend_max_ms, options.command_resend_ms);
  o.reservation_ttl_ms = 4000;
  o.dispatch_ttl_ms = 8000;
  o.expiry_skew_ms = 5000;
  o.sweep_interval_ms = 2000;
  // No re-send at all when the interval outlives every command (a test's
  // switch): a re-send waits at most max(busy_retry_ms, half the life left).
  o.busy_retry_ms = options.command_resend_ms > o.dispatch_ttl_ms ? options.command_resend_ms : 500;
  o.ack_interval_ms = 50;
  o.refund_retry_base_ms = 200;
  o.refund_retry_max_ms = 5000;
  return o;
}

fw::CoreOptions world_core_options() {
  fw::CoreOptions o;
  o.expiry_skew_ms = 5000;
  o.motor_timeout_ms = 2000;
  o.retransmit_ms = 2000;
  o.reconnect_jitter_max_ms = 500;
  o.snapshot_interval_ms = 10000;
  o.auto_confirm_restock = true;
  return o;
}

std::string device_id(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "vm-%03d", i + 1);
  return buf;
}

std::vector<std::string> device_ids(int machines) {
  std::vector<std::string> ids;
  ids.reserve(static_cast<size_t>(std::max(machines, 0)));
  for (int i = 0; i < machines; ++i) ids.push_back(device_id(i));
  return ids;
}

class World {
 public:
  World(const WorldOptions& options, std::string dir)
      : options_(options),
        dir_(std::move(dir)),
        random_(options.seed),
        trace_(options.trace_path),
        log_(options.verbose ? static_cast<Logger*>(new StderrLogger(LogLevel::kWarn))
                             : new NullLogger()),
        agents_(options, dir_ + "/" + kAgentDbName, world_agent_options(options),
                device_ids(options.machines), bus_, clock_, random_, *log_, trace_),
        flood_(options.flood_rate, random_, clock_, trace_) {}

  Result<WorldReport> run();

 private:
  Status set_up();
  Status provision(const std::string& id);
  Status one_step(bool workload);
  bool check(CheckPhase phase);
  std::vector<Violation> check_acks();
  void maybe_plant_violation();
  bool quiet();
  void count_outcomes();

  WorldOptions options_;
  std::string dir_;
  ManualClock clock_;
  SeededRandom random_;
  Trace trace_;
  std::unique_ptr<Logger> log_;
  InMemoryBus bus_;
  WorldAgents agents_;
  WorldFlood flood_;  // after agents_ and random_
  std::vector<std::unique_ptr<WorldMachine>> machines_;
  std::unique_ptr<WorldWorkload> workload_;
  std::unique_ptr<WorldFaults> faults_;
  std::unique_ptr<InvariantChecker> checker_;
  std::unique_ptr<LostCommandWatch> lost_commands_;
  WorldReport report_;
  int64_t step_ = 0;
  std::map<std::string, sql::Database> ack_dbs_;  // file -> read connection (check_acks)
};

Status World::provision(const std::string& id) {
  std::vector<agent::SlotSpec> specs;
  std::vector<fw::SlotConfig> slots;
  for (int s = 1; s <= options_.slots; ++s) {
    specs.push_back({s, "product-" + std::to_string(s), 100 + 25 * s, options_.capacity});
    slots.push_back({s, options_.capacity, "product-" + std::to_string(s), -1});
  }
  Result<agent::ProvisionedDevice> provisioned = make_error("unavailable", "not called");
  Status routed = agents_.route([&](agent::AgentCore& core) {
    provisioned = core.provision_device(id, specs);
    return status_of(provisioned);
  });
  if (!routed.ok()) return routed;
  auto key = crypto::Key::from_hex(provisioned->key_hex);
  if (!key.ok()) return key.error();
  fw::SimulatedMachineOptions mechanics{300, options_.faults.jam};
  MachineSetup setup{id,       *key, dir_ + "/" + ledger_file_name(id), slots, world_core_options(),
                     mechanics};
  machines_.push_back(
      std::make_unique<WorldMachine>(std::move(setup), bus_, clock_, random_, *log_, trace_));
  return machines_.back()->boot();
}

Status World::set_up() {
  trace_.add("world seed " + std::to_string(options_.seed) + " machines " +
             std::to_string(options_.machines) + " slots " + std::to_string(options_.slots));
  if (Status s = agents_.start(); !s.ok()) return s;
  FleetFiles files;
  files.agent_db = dir_ + "/" + kAgentDbName;
  std::vector<std::string> ids;
  for (int i = 0; i < options_.machines; ++i) {
    ids.push_back(device_id(i));
    if (Status s = provision(ids.back()); !s.ok()) return s;
    files.ledgers[ids.back()] = dir_ + "/" + ledger_file_name(ids.back());
  }
  checker_ = std::make_unique<InvariantChecker>(files);
  workload_ = std::make_unique<WorldWorkload>(
      options_, world_agent_options(options_).reservation_ttl_ms, ids, random_, clock_, trace_);
  faults_ =
      std::make_unique<WorldFaults>(options_.faults, random_, bus_, machines_, agents_, trace_);
  faults_->on_ledger_replaced([this](const std::string& device, const std::string& path) {
    checker_->add_replaced_ledger(device, path);
  });
  lost_commands_ = std::make_unique<LostCommandWatch>(dir_);
  return {};
}

Status World::one_step(bool workload) {
  ++step_;
  clock_.advance(workload ? random_.range(0, options_.max_advance_ms) : kSettleAdvanceMs);
  trace_.set_step(step_, clock_.monotonic_ms());
  if (Status s = faults_->step(step_); !s.ok()) return s;
  workload_->step(
      agents_, workload,
      [this, workload] {
        if (workload) faults_->maybe_crash_agent(kAfterAnswerCrashFactor);
      },
      [this, workload](WorldAgent& agent, agent::CallPoint point, const std::string& call) {
        return workload && faults_->maybe_crash_in_call(agent, point, call, kInCallCrashFactor);
      });
  if (workload) flood_.step(agents_);
  // The agent may die between any two parts of a step, losing every write
  // nobody waited for (its group commit had not happened yet).
  if (workload) faults_->maybe_crash_agent();
  if (workload) {
    auto n = random_.range(0, options_.max_deliveries_per_step);
    for (int64_t i = 0; i < n && bus_.deliver_one(); ++i) {
    }
    faults_->maybe_crash_agent();
  } else {
    bus_.deliver_all(100'000);
  }
  for (auto& m : machines_) m->tick();
  agents_.tick();
  if (workload) faults_->maybe_crash_agent();
  agents_.flush();
  maybe_plant_violation();
  return {};
}

void World::maybe_plant_violation() {
  if (options_.plant_violation_at_step <= 0 || step_ < options_.plant_violation_at_step) return;
  auto db = sql::Database::open(dir_ + "/" + ledger_file_name(machines_.front()->id()));
  if (!db.ok()) return;
  Status s = db->exec(
      "UPDATE tokens SET state = 'AVAILABLE', order_id = NULL WHERE token = "
      "(SELECT token FROM tokens WHERE state = 'CONSUMED' ORDER BY token LIMIT 1)");
  if (s.ok() && db->changes() > 0) {
    trace_.add("planted: a consumed token made available again in " + machines_.front()->id());
    options_.plant_violation_at_step = 0;
  }
}

// Nothing acknowledged unprocessed: no machine's ledger holds a cumulative
// ack (meta.acked_seq) beyond the seq the agent database records as
// processed for it. An ack is sent only once its event's writes are durable,
// so a crash, a fenced write or a shard moving must never open that gap.
std::vector<Violation> World::check_acks() {
  auto db = [this](const std::string& file) -> sql::Database* {
    auto it = ack_dbs_.find(file);
    if (it == ack_dbs_.end()) {
      auto opened = sql::Database::open(dir_ + "/" + file);
      if (!opened.ok()) return nullptr;
      it = ack_dbs_.emplace(file, std::move(opened).value()).first;
    }
    return &it->second;
  };
  sql::Database* agent_db = db(kAgentDbName);
  if (agent_db == nullptr) return {};
  std::vector<Violation> out;
  for (auto& m : machines_) {
    sql::Database* ledger = db(ledger_file_name(m->id()));
    if (ledger == nullptr) continue;
    auto acked = ledger->prepare("SELECT value FROM meta WHERE key = 'acked_seq'");
    auto processed = agent_db->prepare(
        "SELECT COALESCE(MAX(last_processed_seq), 0) FROM device_seq WHERE device = ?");
    if (!acked.ok() || !processed.ok()) continue;
    processed->bind(1, m->id());
    auto acked_row = acked->step();
    auto processed_row = processed->step();
    if (!acked_row.ok() || !*acked_row || !processed_row.ok() || !*processed_row) continue;
    int64_t ack = acked->column_int64(0);
    int64_t done = processed->column_int64(0);
    if (ack > done) {
      out.push_back({"acked_unprocessed", m->id() + " holds an ack of seq " + std::to_string(ack) +
                                              ", the agent database has it processed up to " +
                                              std::to_string(done)});
    }
  }
  return out;
}

bool World::check(CheckPhase phase) {
  std::map<std::string, int64_t> rotations;  // the motors' own count: the physical truth
  for (auto& m : machines_) rotations[m->id()] = m->mechanics().rotations();
  auto violations = checker_->check(phase, rotations);
  if (violations.ok() && violations->empty()) {
    Promises promises{workload_->answered_orders(), workload_->answered_payments()};
    violations = checker_->check_promises(promises, phase);
  }
  if (violations.ok() && violations->empty()) violations = agents_.check_leases();
  if (violations.ok() && violations->empty()) violations = flood_.take_violations();
  if (violations.ok() && violations->empty()) violations = check_acks();
  if (violations.ok() && violations->empty()) {
    lost_commands_->add(faults_->take_lost_commands());
    violations = lost_commands_->check(*faults_);
  }
  if (violations.ok() && violations->empty()) return true;
  report_.ok = false;
  report_.failed_step = step_;
  std::string what = violations.ok() ? format_violations(*violations)
                                     : "checker error: " + violations.error().to_string() + "\n";
  report_.failure = "seed " + std::to_string(options_.seed) + ", step " + std::to_string(step_) +
                    (phase == CheckPhase::kSettled ? " (settled)" : "") + ":\n" + what +
                    "last trace lines:\n" + trace_.last_lines();
  return false;
}

bool World::quiet() {
  if (bus_.pending() != 0 || !agents_.whole()) return false;
  for (auto& m : machines_) {
    if (!m->up() || !m->idle() || m->outbox_depth() != 0) return false;
  }
  bool open = false;
  agents_.each_core([&](agent::AgentCore& core) {
    for (auto state : {agent::OrderState::kReserved, agent::OrderState::kPaid,
                       agent::OrderState::kDispatched, agent::OrderState::kFailed}) {
      auto orders = core.list_orders(state, 1);
      open = open || !orders.ok() || !orders->empty();
    }
  });
  if (open) return false;
  auto refunds = agents_.at(0).core().list_refunds(agent::RefundState::kPending, 1);
  return refunds.ok() && refunds->empty();
}

void World::count_outcomes() {
  if (!agents_.up()) return;
  using agent::OrderState;
  auto count = [&](OrderState s) {
    int64_t n = 0;
    agents_.each_core([&](agent::AgentCore& core) {
      auto orders = core.list_orders(s, 1'000'000);
      n = (n < 0 || !orders.ok()) ? -1 : n + static_cast<int64_t>(orders->size());
    });
    return n;
  };
  report_.completed = count(OrderState::kCompleted);
  report_.refunded = count(OrderState::kRefunded);
  report_.needs_review = count(OrderState::kNeedsReview);
  report_.expired = count(OrderState::kExpired);
  report_.cancelled = count(OrderState::kCancelled);
  report_.orders = workload_->orders_created();
  report_.rejected_orders = workload_->orders_refused();
  const FaultCounters& f = faults_->counters();
  report_.machine_crashes = f.machine_crashes;
  report_.agent_crashes = f.agent_crashes;
  report_.partitions = f.partitions;
  report_.agents = static_cast<int>(agents_.size());
  report_.agent_pauses = f.agent_pauses;
  report_.agent_db_partitions = f.agent_db_partitions;
  report_.agent_clock_steps = f.agent_clock_steps;
  report_.commands_lost = f.commands_lost;
  report_.lost_commands_completed = lost_commands_->completed();
  report_.ledger_restores = f.ledger_restores;
  report_.fenced_writes = agents_.fenced_writes();
  report_.rebuilds = agents_.rebuilds();
  report_.calls_refused_busy = agents_.calls_refused_busy();
  report_.flood_requests = flood_.requests();
}

Result<WorldReport> World::run() {
  report_.seed = options_.seed;
  if (Status s = set_up(); !s.ok()) return s.error();
  bool ok = true;
  for (int64_t i = 0; ok && i < options_.steps; ++i) {
    if (Status s = one_step(true); !s.ok()) return s.error();
    ok = !options_.check_every_step || check(CheckPhase::kRunning);
  }
  if (ok) {
    if (Status s = faults_->heal_all(); !s.ok()) return s.error();
    for (int64_t t = 0; ok && t < kSettleMaxMs; t += kSettleAdvanceMs) {
      if (Status s = one_step(false); !s.ok()) return s.error();
      ok = !options_.check_every_step || check(CheckPhase::kRunning);
      if ((step_ % kSettleQuietCheckEvery) == 0 && quiet()) break;
    }
    ok = ok && check(CheckPhase::kSettled);
  }
  trace_.add(ok ? "world ok" : "world FAILED");
  count_outcomes();
  report_.steps = step_;
  report_.trace_hash = trace_.hash();
  report_.trace_lines = trace_.lines();
  return report_;
}

}  // namespace

std::string WorldReport::summary() const {
  char buf[512];
  std::snprintf(buf, sizeof buf,
                "seed %llu: %s after %lld steps; orders %lld (refused %lld): completed %lld, "
                "refunded %lld, needs_review %lld, expired %lld, cancelled %lld; crashes: "
                "machine %lld, agent %lld; partitions %lld; trace %016llx",
                static_cast<unsigned long long>(seed), ok ? "ok" : "FAILED",
                static_cast<long long>(steps), static_cast<long long>(orders),
                static_cast<long long>(rejected_orders), static_cast<long long>(completed),
                static_cast<long long>(refunded), static_cast<long long>(needs_review),
                static_cast<long long>(expired), static_cast<long long>(cancelled),
                static_cast<long long>(machine_crashes), static_cast<long long>(agent_crashes),
                static_cast<long long>(partitions), static_cast<unsigned long long>(trace_hash));
  std::string out = buf;
  if (agents > 1) {
    out += "; agents " + std::to_string(agents) + ": pauses " + std::to_string(agent_pauses) +
           ", db partitions " + std::to_string(agent_db_partitions) + ", fenced writes " +
           std::to_string(fenced_writes);
  }
  if (flood_requests > 0 || calls_refused_busy > 0) {
    out += "; rebuilds " + std::to_string(rebuilds) + ", flood requests " +
           std::to_string(flood_requests) + ", calls refused busy " +
           std::to_string(calls_refused_busy);
  }
  if (commands_lost > 0 || ledger_restores > 0) {
    out += "; commands lost " + std::to_string(commands_lost) + " (undisturbed, completed " +
           std::to_string(lost_commands_completed) + "), ledgers restored " +
           std::to_string(ledger_restores);
  }
  return out;
}

Result<WorldReport> run_world(const WorldOptions& options) {
  auto dir = WorkDir::make(options.work_dir);
  if (!dir.ok()) return dir.error();
  Result<WorldReport> report = make_error("internal", "not run");
  {
    World world(options, dir->path());
    report = world.run();
  }  // every file closed before the directory goes
  return report;
}

}  // namespace vend::sim
