// Benchmark: a fleet at the size several agents exist for (issue 35,
// docs/benchmarks.md "Fleet scale"). PostgreSQL started as the tests start
// it, its schema created by vend-agent, then seeded with set-based SQL
// (fleet_scale_seed.hpp): N machines x 8 slots and about H history rows.
// One mosquitto, three vend-agent instances (--instance-id, shipped lease
// defaults), the N machines live over MQTT in this process (the real
// firmware core, default firmware options: fleet_scale_machines.hpp), and
// steady sales (fleet_scale_sales.hpp).
//
// Faults, alternating: kill -9 of one agent (restarted afterwards) and
// SIGSTOP of another until the survivors serve its machines and a lease
// has surely passed (then SIGCONT); the shards settle in between. Per fault:
//   failover   for 20 machines of the victim, the time from the fault until
//              an order on the machine, sent through the survivors
//              (following their 307s), is answered 201 by the new owner
//   rebuild    the survivors' vend_cluster_last_rebuild_seconds
//   repeated   rebuilds of a survivor beyond one, and shards gained beyond
//              the victim's (each shard moves once per fault): must be 0
//   lapsed     shards the survivors lost while the victim was away (nothing
//              to hand over to: a lease that lapsed)
// Also: RSS per agent, device events/s ingested (vend_device_events_total)
// and acknowledged after commit (every machine's outbox empty), paid sales.
//
// The same run first does all of it with 20 machines and no history (the
// baseline of failover), then with the N machines and no history (the
// baseline of the rebuild: history must cost nothing). The machines run in child processes of this
// binary (fleet_scale_hosts.hpp), 2,500 a process. Size: VEND_BENCH_FLEET_MACHINES (default 20000)
// and VEND_BENCH_FLEET_HISTORY_ROWS (default 10000000); --runs N faults of each kind (default 3).
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_agent_rig.hpp"
#include "bench_cluster_rig.hpp"
#include "bench_util.hpp"
#include "fleet_scale_hosts.hpp"
#include "fleet_scale_sales.hpp"
#include "fleet_scale_seed.hpp"
#include "vend/crypto.hpp"

namespace vend::bench {
namespace {

using namespace std::chrono_literals;

constexpr const char* kBench = "bench_fleet_scale";
constexpr int kAgents = 3;
constexpr int kSlots = 8;
constexpr int kProbes = 20;             // machines of the victim timed per fault
constexpr double kSalesPerS = 20;       // steady sales, the whole fleet
constexpr int64_t kPausedMinMs = 6000;  // SIGSTOP at least twice the 3 s lease
constexpr int kBaselineMachines = 20;
constexpr int kSteadyS = 10;            // device events/s measured before the faults
constexpr int kMachinesPerHost = 2500;  // fleet_scale_hosts.hpp: ~4 descriptors each

int64_t env_int(const char* name, int64_t fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long long n = std::strtoll(v, &end, 10);
  if (*end != '\0' || n < 0) throw std::runtime_error(std::string(name) + ": not a count: " + v);
  return n;
}

// Every machine holds a socket and its ledger's files: far more than the
// default 20,000 descriptors. Children (mosquitto, the agents) inherit it.
void raise_fd_limit(int machines) {
  rlim_t want = static_cast<rlim_t>(machines) * 5 + 8192;
  rlimit l{};
  if (::getrlimit(RLIMIT_NOFILE, &l) != 0 || l.rlim_cur >= want) return;
  rlimit raised{want, std::max(want, l.rlim_max)};
  if (::setrlimit(RLIMIT_NOFILE, &raised) != 0) {
    raised = {l.rlim_max, l.rlim_max};
    (void)::setrlimit(RLIMIT_NOFILE, &raised);
    progress(kBench, "could not raise the descriptor limit to " + std::to_string(want) + " (kept " +
                         std::to_string(l.rlim_max) + ")");
  }
}

struct Rig {
  test::TempDir dir;
  test::PostgresServer postgres;
  test::MosquittoServer broker;
  std::string token, secret;
  Rig() {
    token = crypto::Key::generate().to_hex();
    secret = crypto::Key::generate().to_hex();
    test::write_private_file(dir.file("operator.token"), token + "\n");
    test::write_private_file(dir.file("gateway.secret"), secret + "\n");
  }
};

struct Figures {
  std::vector<double> failover_s;  // every probe of every fault
  std::vector<double> rebuild_s;   // each survivor's rebuild, each fault
  int64_t repeated_rebuilds = 0, extra_shard_moves = 0, leases_lapsed = 0, rounds_failed = 0;
  int64_t exited_after_resume = 0;
  std::vector<double> rss_mib;  // per agent, the largest seen
  double setup_s = 0, seed_s = 0, ingest_events_per_s = 0, ingest_s = 0;
  double sales_events_per_s = 0;
  Sales::Counts sales;
  int64_t history_rows = 0;
};

struct Counters {
  double rebuilds = 0, gained = 0, lost = 0, failed_rounds = 0, last_rebuild_s = 0, held = 0;
  double events = 0;
};

Counters counters_of(const AgentCluster& a, size_t i) {
  std::string m = a.metrics(i);
  return {metric_value(m, "vend_cluster_rebuilds_total"),
          metric_value(m, "vend_cluster_shards_gained_total"),
          metric_value(m, "vend_cluster_shards_lost_total"),
          metric_value(m, "vend_cluster_lease_rounds_failed_total"),
          metric_value(m, "vend_cluster_last_rebuild_seconds"),
          metric_value(m, "vend_cluster_shards_held"),
          metric_value(m, "vend_device_events_total")};
}

double events_total(const AgentCluster& a) {
  double n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += counters_of(a, i).events;
  return n;
}

void must(Status s) {
  if (!s.ok()) throw std::runtime_error(s.error().to_string());
}

void wait_settled(const AgentCluster& a, const std::vector<size_t>& live, const Rig& rig,
                  const std::string& what) {
  if (!wait_for([&] { return settled(a, live, rig.token); }, 180s)) {
    throw std::runtime_error(what + ": the shards never settled");
  }
}

// Up to kProbes machines served by `victim` now.
std::vector<std::string> probes_of(const AgentCluster& a, size_t victim,
                                   const std::vector<std::string>& ids, size_t fault,
                                   const Rig& rig) {
  std::vector<std::string> probes;
  for (size_t k = 0; k < ids.size() && probes.size() < kProbes && k < 50 * kProbes; ++k) {
    const std::string& id = ids[(fault * 104729 + k * 7907) % ids.size()];
    auto r = a.get(victim, "/v1/devices/" + id + "/slots", rig.token);
    if (r && r->status == 200) probes.push_back(id);
  }
  if (probes.empty()) throw std::runtime_error("the victim serves none of the machines tried");
  return probes;
}

// Seconds from t0 until each probe is ordered on through a survivor.
std::vector<double> time_failover(const AgentCluster& a, const std::vector<size_t>& survivors,
                                  const std::vector<std::string>& probes, int64_t t0) {
  std::vector<double> seconds(probes.size(), -1);
  std::vector<std::thread> threads;
  for (size_t p = 0; p < probes.size(); ++p) {
    threads.emplace_back([&, p] {
      for (size_t turn = p;; ++turn) {
        size_t via = survivors[turn % survivors.size()];
        std::string order = order_via(a, via, probes[p], 1 + static_cast<int>(turn % kSlots));
        if (!order.empty()) {
          seconds[p] = static_cast<double>(now_ns() - t0) * 1e-9;
          cancel_via(a, via, order);
          return;
        }
        if (now_ns() - t0 > 120'000'000'000) return;
        std::this_thread::sleep_for(20ms);
      }
    });
  }
  for (auto& t : threads) t.join();
  for (size_t p = 0; p < probes.size(); ++p) {
    if (seconds[p] < 0) throw std::runtime_error(probes[p] + ": not served 120 s after the fault");
  }
  return seconds;
}

void sample_rss(const AgentCluster& a, Figures& f) {
  f.rss_mib.resize(a.size(), 0);
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a.running(i)) continue;
    auto kib = rss_kib(a.pid(i));
    if (kib) f.rss_mib[i] = std::max(f.rss_mib[i], static_cast<double>(*kib) / 1024.0);
  }
}

// One fault on `victim` (kill -9 when `kill`, else SIGSTOP), measured, then
// undone, and the shards settled again.
void one_fault(AgentCluster& a, const std::vector<std::string>& ids, size_t fault, bool kill,
               const Rig& rig, Figures& f) {
  std::vector<size_t> all = {0, 1, 2}, survivors;
  size_t victim = fault % kAgents;
  for (size_t i : all) {
    if (i != victim) survivors.push_back(i);
  }
  wait_settled(a, all, rig, "before fault " + std::to_string(fault + 1));
  std::vector<std::string> probes = probes_of(a, victim, ids, fault, rig);
  std::map<size_t, Counters> before;
  for (size_t i : all) before[i] = counters_of(a, i);
  int64_t t0 = now_ns();
  kill ? a.kill9(victim) : a.pause(victim);
  std::vector<double> s = time_failover(a, survivors, probes, t0);
  f.failover_s.insert(f.failover_s.end(), s.begin(), s.end());
  wait_settled(a, survivors, rig, "fault " + std::to_string(fault + 1));
  int64_t away_ms = (now_ns() - t0) / 1'000'000;
  std::this_thread::sleep_for(std::chrono::milliseconds(std::max<int64_t>(
      3000, kill ? 0 : kPausedMinMs - away_ms)));  // late rebuilds or lapses show up here
  double gained = 0;
  for (size_t i : survivors) {
    Counters c = counters_of(a, i);
    double rebuilds = c.rebuilds - before[i].rebuilds;
    f.repeated_rebuilds += static_cast<int64_t>(std::max(0.0, rebuilds - 1));
    if (rebuilds > 0) f.rebuild_s.push_back(c.last_rebuild_s);
    gained += c.gained - before[i].gained;
    f.leases_lapsed += static_cast<int64_t>(c.lost - before[i].lost);
    f.rounds_failed += static_cast<int64_t>(c.failed_rounds - before[i].failed_rounds);
  }
  f.extra_shard_moves += static_cast<int64_t>(std::max(0.0, gained - before[victim].held));
  sample_rss(a, f);
  progress(kBench, std::string(kill ? "kill -9" : "SIGSTOP") + " of agent " +
                       std::to_string(victim) + ": its machines served again after " +
                       std::to_string(*std::max_element(s.begin(), s.end())) + " s at worst");
  if (kill) {
    must(a.start(victim, 600s));
  } else {
    a.resume(victim);
    std::this_thread::sleep_for(2s);
    if (!a.running(victim)) {  // counted: a resumed agent should rejoin, not exit
      ++f.exited_after_resume;
      must(a.start(victim, 600s));
    }
  }
}

Figures run_world(Rig& rig, const std::string& name, int machines, int64_t history_rows,
                  int faults_per_kind) {
  Figures f;
  Stopwatch watch;
  rig.postgres.create_database(name);
  AgentCluster agents(rig.dir, rig.postgres.url(name), rig.broker.url(), name, kAgents);
  must(agents.start(0));  // creates the schema
  if (agents.stop(0) != 0) throw std::runtime_error(name + ": the schema agent did not stop");
  Stopwatch seed;
  f.history_rows = seed_fleet(rig.postgres, name, {name, machines, kSlots, 100, history_rows});
  f.seed_s = seed.elapsed_s();
  progress(kBench, name + ": " + std::to_string(machines) + " machines and " +
                       std::to_string(f.history_rows) + " history rows seeded in " +
                       std::to_string(f.seed_s) + " s");
  for (size_t i = 0; i < kAgents; ++i) must(agents.start(i, 600s));
  wait_settled(agents, {0, 1, 2}, rig, name + " start");
  test::TempDir ledgers;
  ScaleFleetSpec spec;
  spec.prefix = name;
  spec.machines = machines;
  spec.broker_url = rig.broker.url();
  spec.ledger_dir = ledgers.path();
  auto hosts = FleetHosts::start(spec, kMachinesPerHost, 1800);
  if (!hosts.ok()) throw std::runtime_error(hosts.error().to_string());
  const FleetHosts& fleet = **hosts;
  f.setup_s = watch.elapsed_s();
  progress(kBench, name + ": fleet booted and connected after " + std::to_string(f.setup_s) + " s");
  Stopwatch ingest;
  double e0 = events_total(agents);
  std::this_thread::sleep_for(1s);  // every machine has stepped and counted its outbox
  if (!wait_for([&] { return fleet.online() == machines && fleet.unacked_events() == 0; }, 600s)) {
    throw std::runtime_error(name + ": " + std::to_string(fleet.unacked_events()) +
                             " events still unacknowledged, " + std::to_string(fleet.online()) +
                             " machines online");
  }
  f.ingest_s = ingest.elapsed_s();
  f.ingest_events_per_s = (events_total(agents) - e0) / f.ingest_s;
  progress(kBench, name + ": every machine's boot events acknowledged after " +
                       std::to_string(f.ingest_s) + " s");
  std::vector<int> ports;
  for (size_t i = 0; i < kAgents; ++i) ports.push_back(agents.port(i));
  Sales sales(ports, fleet.ids(), kSlots, rig.secret, kSalesPerS);
  std::this_thread::sleep_for(2s);
  Stopwatch selling;  // before any fault: the agents' counters only grow
  double s0 = events_total(agents);
  std::this_thread::sleep_for(std::chrono::seconds(kSteadyS));
  f.sales_events_per_s = (events_total(agents) - s0) / selling.elapsed_s();
  for (int k = 0; k < 2 * faults_per_kind; ++k) {
    one_fault(agents, fleet.ids(), static_cast<size_t>(k), k % 2 == 0, rig, f);
  }
  wait_settled(agents, {0, 1, 2}, rig, name + " end");
  f.sales = sales.counts();
  sample_rss(agents, f);
  return f;
}

double p(const std::vector<double>& v, double q) { return percentile(v, q); }

void report_world(Report& report, const std::string& w, const Figures& f) {
  report.add(w + "_failover_s_p50", "s", {p(f.failover_s, 50)}, Better::kLower);
  report.add(w + "_failover_s_p99", "s", {p(f.failover_s, 99)}, Better::kLower);
  report.add(w + "_failover_s_max", "s", {p(f.failover_s, 100)}, Better::kLower);
  report.add(w + "_rebuild_s_median", "s", {median(f.rebuild_s)}, Better::kLower);
  report.add(w + "_rebuild_s_max", "s", {p(f.rebuild_s, 100)}, Better::kLower);
  report.add(w + "_repeated_rebuilds", "rebuilds",
             {static_cast<double>(f.repeated_rebuilds + f.extra_shard_moves)}, Better::kLower);
  report.add(w + "_leases_lapsed", "shards", {static_cast<double>(f.leases_lapsed)},
             Better::kLower);
  report.add(w + "_lease_rounds_failed", "rounds", {static_cast<double>(f.rounds_failed)},
             Better::kLower);
  report.add(w + "_agents_exited_after_sigcont", "agents",
             {static_cast<double>(f.exited_after_resume)}, Better::kLower);
  report.add(w + "_agent_rss_mib", "MiB", f.rss_mib, Better::kLower);
  report.add(w + "_boot_events_acked_per_s", "events/s", {f.ingest_events_per_s});
  report.add(w + "_events_per_s_steady", "events/s", {f.sales_events_per_s});
  report.add(w + "_sales_paid", "orders", {static_cast<double>(f.sales.paid)});
  report.add(w + "_sales_refused_or_failed", "orders",
             {static_cast<double>(f.sales.refused + f.sales.failed)}, Better::kLower);
  report.add(w + "_setup_s", "s", {f.setup_s}, Better::kLower);
  report.add(w + "_seed_s", "s", {f.seed_s}, Better::kLower);
}

void run(const Options& opt, Report& report) {
  int machines = static_cast<int>(env_int("VEND_BENCH_FLEET_MACHINES", 20'000));
  int64_t history = env_int("VEND_BENCH_FLEET_HISTORY_ROWS", 10'000'000);
  if (machines < kBaselineMachines) {
    throw std::runtime_error("VEND_BENCH_FLEET_MACHINES: at least " +
                             std::to_string(kBaselineMachines));
  }
  raise_fd_limit(machines);
  Rig rig;
  Figures base = run_world(rig, "fb", kBaselineMachines, 0, opt.runs);
  Figures bare = run_world(rig, "fn", machines, 0, opt.runs);
  Figures big = run_world(rig, "fs", machines, history, opt.runs);
  report_world(report, "baseline", base);
  report_world(report, "fleet_no_history", bare);
  report_world(report, "fleet", big);
  report.compare("fleet_failover_s_p99", "baseline_failover_s_p99", RatioKind::kPlain);
  report.target("fleet_failover_s_p99", "< 5 s and <= 1.5x the baseline's",
                report.at("fleet_failover_s_p99").median < 5.0 &&
                    *report.at("fleet_failover_s_p99").ratio <= 1.5);
  // History must not cost a rebuild anything: the same fleet without it.
  report.compare("fleet_rebuild_s_median", "fleet_no_history_rebuild_s_median", RatioKind::kPlain);
  report.target("fleet_rebuild_s_median", "<= 1.5x the same fleet's without history",
                *report.at("fleet_rebuild_s_median").ratio <= 1.5);
  // What the fleet's size costs (the moved machines), for the record.
  report.compare("fleet_no_history_rebuild_s_median", "baseline_rebuild_s_median",
                 RatioKind::kPlain);
  report.target_value("fleet_repeated_rebuilds", 0);
  report.target_value("fleet_leases_lapsed", 0);
  report.note("fleet: " + std::to_string(machines) + " machines x " + std::to_string(kSlots) +
              " slots, " + std::to_string(big.history_rows) +
              " history rows; fleet_no_history: the same machines without history; baseline: " +
              std::to_string(kBaselineMachines) +
              " machines, no history; 3 agents with the shipped lease defaults on one "
              "PostgreSQL 15, one mosquitto, machines in the bench process");
  report.note(std::to_string(opt.runs) + " kill -9 and " + std::to_string(opt.runs) +
              " SIGSTOP (>= " + std::to_string(kPausedMinMs / 1000) +
              " s) per side, alternating victims; failover over " + std::to_string(kProbes) +
              " machines of the victim per fault, orders through the survivors following 307s; " +
              std::to_string(static_cast<int>(kSalesPerS)) + " sales/s throughout");
  report.note(
      "repeated_rebuilds counts a survivor's rebuilds beyond one per fault plus shards "
      "gained beyond the victim's; leases_lapsed the shards survivors lost while the "
      "victim was away; the metric medians are over one run (runs holds one value)");
}

}  // namespace
}  // namespace vend::bench

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--fleet-host") {
    return vend::bench::run_fleet_host(argc, argv);
  }
  return vend::bench::run_bench(argc, argv, vend::bench::kBench, vend::bench::run);
}
