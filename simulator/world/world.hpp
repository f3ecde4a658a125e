// The deterministic world: the agent core and M firmware cores in one thread,
// on a manual clock and the in-memory bus, with ONE seeded random source for
// workload, faults and the cores themselves. The same seed (and options)
// gives the same run, byte for byte in its trace.
//
// A run: provision the machines at the agent, boot them, restock; then
// `steps` steps of workload and faults; then a settle phase with every fault
// healed, until nothing is in flight. The invariants (invariant_checker.hpp)
// are checked against the ledger files and the agent database after every
// step (kRunning) and once settled (kSettled). The first breach stops the run.
//
// What a step does, in this order: advance the clock 0..max_advance_ms;
// customers and the restocker act; faults fire or heal; the bus delivers
// 0..max_deliveries_per_step messages (through the fault filter); every live
// machine and the agent tick; the agent's pending writes are committed
// (flush, so nothing depends on the writer thread's timing); invariants.
//
// Faults: message drop, duplicate, delay and reorder; network partitions;
// machines going offline; machine crash-restart at any step (so also between
// "token consumed" and "motor ran", and mid-rotation); agent crash-restart
// (database reopened, timers rebuilt, everything in memory lost); wall-clock
// skew per machine. An agent crash happens between any two
// parts of a step and loses every write not committed yet (the repository
// commits only when the core waits for a write or the world flushes), as a
// kill -9 would. Besides the durable records, the checker holds the agent to
// what it told the customers: every order answered as created and every
// payment answered 2xx survive, and every refund reaches the gateway.
//
// With agents > 1 the agent is several instances sharing one database with
// shard leases and a write fence, customers routed to the owner, and the
// instances crash, pause, lose the database and drift (docs/simulator.md,
// "Several agents"; world_agents.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vend/result.hpp"

namespace vend::sim {

struct FaultRates {
  // Per delivery.
  double drop = 0.02;
  double duplicate = 0.03;
  double delay = 0.03;
  int64_t max_delay_steps = 40;
  // Per step.
  double reorder = 0.005;
  double partition = 0.002;      // a machine loses the network for a while
  double offline = 0.002;        // a machine's connection drops (will published)
  double machine_crash = 0.002;  // power loss / kill -9, then reboot
  double agent_crash = 0.0005;
  double clock_skew = 0.002;  // a machine's wall clock jumps within +-max_skew_ms
  int64_t max_skew_ms = 4000;
  double jam = 0.05;  // per rotation
  // Per healed partition: the broker publishes the old connection's will
  // (same boot id) only after the machine's new `online` — the session
  // takeover race of a real broker. Off by default: see docs/simulator.md.
  double presence_race = 0;
  // Several agents (WorldOptions::agents > 1), per step: one instance is
  // paused (SIGSTOP) for 50..600 steps, often past its lease; one loses the
  // database (lease store and repository) for 50..600 steps; one's wall
  // clock jumps within +-max_skew_ms. agent_crash then picks an instance.
  // Each instance's monotonic clock runs up to max_agent_drift_ppm fast or
  // slow for the whole run (the leases tolerate safety_ms per lease_ms).
  double agent_pause = 0.0005;
  double agent_db_partition = 0.0005;
  double agent_clock_skew = 0.0005;
  int64_t max_agent_drift_ppm = 2000;
  // Per step, every world: an agent's wall clock is stepped (NTP, `date -s`)
  // by 1 s..max_agent_step_ms, forward or back, and stepped back again
  // 5..400 steps later. Its deadlines run on the monotonic clock, so the
  // step decides no order; commands it stamps meanwhile expire early or
  // late on the machines' true clocks, and the checker holds either way.
  double agent_clock_step = 0.0003;
  int64_t max_agent_step_ms = 120'000;
  // Per dispense command delivered to a machine (0: off): the broker has
  // acknowledged it to the agent and never delivers it (a session lost, the
  // firmware's inbox dropped it). At most one copy of each order's command
  // is lost; the agent's re-sends must still get the item out.
  double command_lost = 0;
  // Per step (0: off): a machine's ledger is copied now (a backup, or what a
  // power loss at synchronous=normal will leave) and, 1..600 steps later,
  // the machine loses power and boots on that copy: its seqs go back under
  // the same ledger id. What the replaced file held stays the physical truth
  // of the checks (InvariantChecker::add_replaced_ledger).
  double ledger_restore = 0;
  // How long a restored machine stays down, at least (steps; up to twice
  // that): by default longer than a dispense command lives (the world's
  // dispatch TTL plus skew, 13 s), as when a card is swapped. A few steps is
  // a power loss at synchronous=normal with commands still live
  // (docs/simulator.md, "Known limits").
  int64_t restore_down_min_steps = 1500;
};

struct WorldOptions {
  uint64_t seed = 1;
  int machines = 3;
  int slots = 3;
  int capacity = 6;
  int64_t steps = 3000;  // workload steps before settling
  int64_t max_advance_ms = 20;
  int max_deliveries_per_step = 4;
  // Customers, per step.
  double order_rate = 0.05;
  double abandon = 0.15;    // never pay: the reservation expires
  double cancel = 0.05;     // cancel instead of paying
  double pay_twice = 0.10;  // a second payment with another payment id
  double late_pay = 0.03;   // pay after the reservation expired
  double retry_pay = 0.05;  // the gateway repeats a payment (same id)
  FaultRates faults;
  // Several agents sharing one database with shard leases (issue 14): 1
  // keeps the one agent; more run instances a1..aN with their own clocks,
  // lease keepers and bus clients, customers routed to the owner.
  int agents = 1;
  int shards = 16;
  int64_t lease_ms = 3000;
  int64_t renew_ms = 1000;
  int64_t lease_safety_ms = 500;
  // Several agents: a rebuild (ClusterNode's, on its own thread) takes this
  // much virtual time per machine it loads (the gained shards', or every
  // held shard's for a whole rebuild); the instance keeps renewing its
  // leases meanwhile and serves the gained machines only once it is done.
  // 0: a rebuild takes no time.
  int64_t rebuild_ms_per_machine = 0;
  // Several agents: the calls an instance takes per step (its bounded call
  // queue); one more is answered "unavailable", as the HTTP front answers
  // 503 when the core's queue is full. 0: no bound.
  int max_calls_per_step = 0;
  // Several agents: outside requests per step (an expectation: the whole
  // part, then the fraction as a chance) at a random instance, in turn an
  // order for a machine id that does not exist and a look-up of a
  // well-formed order id that was never made (WorldFlood).
  double flood_rate = 0;
  bool check_every_step = true;
  // Test hook: from this step on (0 = never), un-spend one consumed token in
  // the first machine's ledger behind the firmware's back, so the checker must
  // stop the run with dispense_without_token. Pins down the failure report.
  int64_t plant_violation_at_step = 0;
  // The agent's re-send interval of a dispense command still without a
  // result (AgentOptions::command_resend_ms). A test sets it beyond an
  // order's life to see lost_command_not_resent stop the run: then the
  // busy retry, which also bounds a re-send near the expiry, is as long.
  int64_t command_resend_ms = 5000;
  // Where the ledgers and the agent database go; "" = a temporary directory
  // removed afterwards. A given directory is kept (and must be empty).
  std::string work_dir;
  std::string trace_path;  // "" = no trace file
  bool verbose = false;    // core logs to stderr
  std::string scenario;    // name, for reports
};

struct WorldReport {
  bool ok = true;
  uint64_t seed = 0;
  int64_t steps = 0;         // steps run, settle included
  int64_t failed_step = -1;  // the step of the first breach
  std::string failure;       // invariant, evidence and the last trace lines
  uint64_t trace_hash = 0;   // FNV-1a of every trace line
  int64_t trace_lines = 0;
  // Outcomes.
  int64_t orders = 0, paid = 0, completed = 0, refunded = 0, needs_review = 0, expired = 0,
          cancelled = 0, rejected_orders = 0;
  int64_t machine_crashes = 0, agent_crashes = 0, partitions = 0;
  // Several agents: pauses, database partitions, and writes the fence refused.
  int agents = 1;
  int64_t agent_pauses = 0, agent_db_partitions = 0, fenced_writes = 0;
  int64_t agent_clock_steps = 0;
  // Dispense commands the broker lost after accepting them, those of them
  // whose order still ended COMPLETED, and ledgers restored from a copy.
  int64_t commands_lost = 0, lost_commands_completed = 0, ledger_restores = 0;
  // Several agents: rebuilds finished, calls refused for a full call queue,
  // and flood requests sent (every one answered not_found or unavailable).
  int64_t rebuilds = 0, calls_refused_busy = 0, flood_requests = 0;
  std::string summary() const;  // one line
};

// Runs one world. Errors only for set-up failures (files, start-up); a
// breach of the promise is a report with ok = false.
Result<WorldReport> run_world(const WorldOptions& options);

// Options from a scenario file (simulator/scenarios/*.json): any field of
// WorldOptions / FaultRates by name, at the top level and under "faults".
// Unknown keys are errors naming the key. Fields not given keep `base`.
Result<WorldOptions> load_scenario(const std::string& path, WorldOptions base);

}  // namespace vend::sim
