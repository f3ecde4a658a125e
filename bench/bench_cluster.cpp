// Benchmarks of several agents (issue 14, docs/benchmarks.md "Several
// agents"), with the real binaries: PostgreSQL started as the tests start it
// (tests/support PostgresServer), mosquitto, vend-agent instances with
// --instance-id and the shipped lease defaults (--lease-ms 3000,
// --renew-ms 1000: no tuning flags), in-process machines (the rig's Fleet).
//
//   failover    20 kills: kill -9 the owner of a machine, then order on that
//               machine through the other instances (following their 307s)
//               until one answers 201; the time from the kill to that 201.
//               min / median / P99 / max over the kills. Target P99 < 5 s.
//   throughput  durable paid orders/s (reserve + signed payment, a 200 to
//               the payment) from closed-loop customers, with 1, 2 and 3
//               instances on one PostgreSQL, against one agent on SQLite in
//               the same run; each customer sends a machine's requests to its
//               owner (as a client that followed one redirect would).
#include <httplib.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "bench_agent_rig.hpp"
#include "bench_cluster_rig.hpp"
#include "bench_util.hpp"
#include "vend/crypto.hpp"

namespace vend::bench {
namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

constexpr const char* kBench = "bench_cluster";
constexpr int kKills = 20;
constexpr int kClosedLoopClients = 32;
constexpr int kMachines = 10;
constexpr int kSlots = 20;  // 200 slots a side

// Each instance lists the machines it serves: together they see all online.
void wait_fleet_online(const AgentCluster& a, size_t machines, const std::string& token) {
  bool up = wait_for(
      [&] {
        size_t online = 0;
        for (size_t i = 0; i < a.size(); ++i) {
          auto r = a.get(i, "/v1/devices", token);
          if (!r || r->status != 200) return false;
          Json j = Json::parse(r->body, nullptr, false);
          if (j.is_discarded() || !j.contains("devices")) return false;
          for (const auto& d : j["devices"]) online += d.value("online", false) ? 1 : 0;
        }
        return online == machines;
      },
      60s);
  if (!up) throw std::runtime_error("the agents never saw every machine online");
}

// Fleet::fill, again while a shard is still moving (503 "unavailable"):
// shards can still change hands right after the instances settled. A
// repeated restock may go over `count`: the fleets' capacity is twice it.
void fill_retrying(Fleet& fleet, int count) {
  for (int attempt = 1;; ++attempt) {
    Status s = fleet.fill(count, 120s);
    if (s.ok()) return;
    if (attempt >= 2 || s.error().code != "unavailable") {
      throw std::runtime_error(s.error().to_string());
    }
    std::this_thread::sleep_for(2s);
  }
}

// Every machine served (its slots answered 200 by one instance, not a 503
// while its shard is rebuilt): then the fill's restocks are not refused.
void wait_fleet_served(const AgentCluster& a, const Fleet& fleet, const std::string& token) {
  for (const std::string& id : fleet.ids()) {
    if (!wait_for([&] { return owner_of(a, id, token) >= 0; }, 60s)) {
      throw std::runtime_error(id + ": no instance serves it");
    }
  }
}

// Everything a side of the run needs: its agents, its fleet, the owner of
// each machine for the customers.
struct Side {
  std::string name;
  std::unique_ptr<AgentCluster> agents;  // PostgreSQL sides
  std::unique_ptr<AgentServer> sqlite;   // the SQLite side
  std::unique_ptr<Fleet> fleet;
  std::vector<int> owner_port;  // per machine of the fleet
  std::vector<pid_t> pids;
  std::string gateway_secret;
  std::atomic<uint64_t> payment_seq{0};
};

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
  FleetTarget target(const AgentCluster& a) const {
    FleetTarget t{a.port(0), broker.url(), token, secret, dir.path(), false, {}};
    for (size_t i = 1; i < a.size(); ++i) t.more_ports.push_back(a.port(i));
    return t;
  }
};

// ---- failover ----------------------------------------------------------------

std::vector<double> measure_failover(Rig& rig, int kills, Logger& log) {
  rig.postgres.create_database("failover");
  AgentCluster agents(rig.dir, rig.postgres.url("failover"), rig.broker.url(), "fo", 3);
  for (size_t i = 0; i < 3; ++i) {
    if (Status s = agents.start(i); !s.ok()) throw std::runtime_error(s.error().to_string());
  }
  std::vector<size_t> all = {0, 1, 2};
  if (!wait_for([&] { return settled(agents, all, rig.token); }, 30s)) {
    throw std::runtime_error("the three instances never split the shards");
  }
  FleetSpec spec;
  spec.prefix = "fo";
  spec.machines = 6;
  spec.slots = 1;
  spec.capacity = 1000;
  spec.tick_us = 5000;
  auto fleet = Fleet::start(spec, rig.target(agents), log);
  if (!fleet.ok()) throw std::runtime_error(fleet.error().to_string());
  wait_fleet_online(agents, (*fleet)->ids().size(), rig.token);
  wait_fleet_served(agents, **fleet, rig.token);
  fill_retrying(**fleet, 500);
  std::vector<double> seconds;
  for (int k = 0; k < kills; ++k) {
    const std::string& device = (*fleet)->ids()[static_cast<size_t>(k) % (*fleet)->ids().size()];
    int owner = -1;
    bool ready = wait_for(
        [&] {
          if (!settled(agents, all, rig.token)) return false;
          owner = owner_of(agents, device, rig.token);
          if (owner < 0) return false;
          std::string id = order_via(agents, static_cast<size_t>(owner), device);
          if (id.empty()) return false;
          cancel_via(agents, static_cast<size_t>(owner), id);
          return true;
        },
        60s);
    if (!ready) throw std::runtime_error("kill " + std::to_string(k + 1) + ": never settled");
    int64_t t0 = now_ns();
    agents.kill9(static_cast<size_t>(owner));
    std::string served;
    for (size_t turn = 0; served.empty(); ++turn) {
      size_t via = (static_cast<size_t>(owner) + 1 + turn % 2) % 3;
      served = order_via(agents, via, device);
      if (!served.empty()) {
        cancel_via(agents, via, served);
        break;
      }
      if (now_ns() - t0 > 60'000'000'000) {
        throw std::runtime_error(device + " not served within 60 s of the kill");
      }
      std::this_thread::sleep_for(20ms);
    }
    seconds.push_back(static_cast<double>(now_ns() - t0) * 1e-9);
    progress(kBench, "kill " + std::to_string(k + 1) + " of instance " + std::to_string(owner) +
                         ": " + device + " served again after " + std::to_string(seconds.back()) +
                         " s");
    if (Status s = agents.start(static_cast<size_t>(owner)); !s.ok()) {
      throw std::runtime_error(s.error().to_string());
    }
  }
  return seconds;
}

// ---- throughput --------------------------------------------------------------

struct Samples {
  int64_t paid = 0, sold_out = 0, errors = 0;
};

void order_and_pay(std::map<int, std::unique_ptr<HttpCustomer>>& by_port, Side& side,
                   std::mt19937_64& rng, Samples& s) {
  size_t m = rng() % side.fleet->ids().size();
  HttpCustomer& c = *by_port.at(side.owner_port[m]);
  auto r = c.create_order(side.fleet->ids()[m], static_cast<int>(rng() % kSlots) + 1);
  if (r.status != 201) {
    ++(r.status == 409 ? s.sold_out : s.errors);
    return;
  }
  std::string pay_id = "pay-" + std::to_string(side.payment_seq.fetch_add(1));
  auto p = c.pay(json_string(r.body, "id"), pay_id, 100);
  ++(p.status == 200 ? s.paid : s.errors);
}

struct Phase {
  double paid_per_s = 0, cpu_us_per_paid = 0;
  Samples total;
};

Phase run_phase(Side& side, double seconds) {
  std::vector<Samples> samples(kClosedLoopClients);
  std::barrier start(kClosedLoopClients + 1);
  std::atomic<int64_t> end_ns{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kClosedLoopClients; ++i) {
    threads.emplace_back([&, i] {
      std::map<int, std::unique_ptr<HttpCustomer>> by_port;
      for (int port : side.owner_port) {
        if (by_port.count(port) == 0) {
          by_port[port] = std::make_unique<HttpCustomer>(port, side.gateway_secret);
          by_port[port]->get("/healthz");  // connected before the clock starts
        }
      }
      std::mt19937_64 rng(static_cast<uint64_t>(i) * 7919 + side.payment_seq.load());
      start.arrive_and_wait();
      while (end_ns.load() == 0) std::this_thread::yield();
      while (now_ns() < end_ns.load()) order_and_pay(by_port, side, rng, samples[i]);
    });
  }
  auto cpu = [&side] {
    double sum = 0;
    for (pid_t p : side.pids) sum += cpu_seconds(p);
    return sum;
  };
  start.arrive_and_wait();
  double cpu0 = cpu();
  int64_t t0 = now_ns();
  end_ns = t0 + static_cast<int64_t>(seconds * 1e9);
  for (auto& t : threads) t.join();
  double elapsed = static_cast<double>(now_ns() - t0) * 1e-9;
  Phase p;
  for (const Samples& s : samples) {
    p.total.paid += s.paid, p.total.sold_out += s.sold_out, p.total.errors += s.errors;
  }
  p.paid_per_s = static_cast<double>(p.total.paid) / elapsed;
  p.cpu_us_per_paid = p.total.paid > 0 ? (cpu() - cpu0) * 1e6 / p.total.paid : 0;
  return p;
}

FleetSpec side_fleet(const std::string& prefix, int fill) {
  FleetSpec spec;
  spec.prefix = prefix;
  spec.machines = kMachines;
  spec.slots = kSlots;
  spec.capacity = 2 * fill;
  spec.step_threads = 2;
  spec.tick_us = 5000;
  return spec;
}

void start_pg_side(Rig& rig, Side& side, int instances, int fill, Logger& log) {
  rig.postgres.create_database(side.name);
  side.agents = std::make_unique<AgentCluster>(rig.dir, rig.postgres.url(side.name),
                                               rig.broker.url(), side.name, instances);
  std::vector<size_t> live;
  for (size_t i = 0; i < static_cast<size_t>(instances); ++i) {
    if (Status s = side.agents->start(i); !s.ok()) throw std::runtime_error(s.error().to_string());
    live.push_back(i);
    side.pids.push_back(side.agents->pid(i));
  }
  if (!wait_for([&] { return settled(*side.agents, live, rig.token); }, 30s)) {
    throw std::runtime_error(side.name + ": the instances never split the shards");
  }
  auto fleet = Fleet::start(side_fleet(side.name, fill), rig.target(*side.agents), log);
  if (!fleet.ok()) throw std::runtime_error(fleet.error().to_string());
  side.fleet = std::move(fleet).value();
  wait_fleet_online(*side.agents, side.fleet->ids().size(), rig.token);
  wait_fleet_served(*side.agents, *side.fleet, rig.token);
  fill_retrying(*side.fleet, fill);
  for (const std::string& id : side.fleet->ids()) {
    int owner = owner_of(*side.agents, id, rig.token);
    if (owner < 0) throw std::runtime_error(id + ": no owner");
    side.owner_port.push_back(side.agents->port(static_cast<size_t>(owner)));
  }
  side.gateway_secret = rig.secret;
  side.fleet->pause(true);  // the machines' ledgers stay out of the measurement
}

void start_sqlite_side(Side& side, int fill, Logger& log) {
  auto server = AgentServer::start({});
  if (!server.ok()) throw std::runtime_error(server.error().to_string());
  side.sqlite = std::move(server).value();
  auto fleet = Fleet::start(side_fleet(side.name, fill), *side.sqlite, log);
  if (!fleet.ok()) throw std::runtime_error(fleet.error().to_string());
  side.fleet = std::move(fleet).value();
  if (Status s = side.fleet->fill(fill, 120s); !s.ok())
    throw std::runtime_error(s.error().to_string());
  side.owner_port.assign(side.fleet->ids().size(), side.sqlite->http_port());
  side.pids = {side.sqlite->agent_pid()};
  side.gateway_secret = side.sqlite->gateway_secret();
  side.fleet->pause(true);
}

void run(const Options& opt, Report& report) {
  StderrLogger log(LogLevel::kError);
  Rig rig;
  int kills = static_cast<int>(scaled(opt, kKills, 3));
  Stopwatch watch;
  std::vector<double> failover = measure_failover(rig, kills, log);
  progress(kBench,
           std::to_string(kills) + " kills took " + std::to_string(watch.elapsed_s()) + " s");
  std::vector<double> sorted = failover;
  std::sort(sorted.begin(), sorted.end());
  auto rank = [&sorted](double p) {
    size_t r = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(sorted.size())));
    return sorted[std::clamp<size_t>(r, 1, sorted.size()) - 1];
  };
  report.add("failover_s_min", "s", {sorted.front()}, Better::kLower);
  report.add("failover_s_median", "s", {rank(50)}, Better::kLower);
  report.add("failover_s_p99", "s", {rank(99)}, Better::kLower);
  report.add("failover_s_max", "s", {sorted.back()}, Better::kLower);
  report.add("failover_s_each_kill", "s", failover, Better::kLower);
  report.target_value("failover_s_p99", 5.0);

  double seconds = 3.0 * opt.scale;
  int fill = static_cast<int>(std::min<int64_t>(500, 20 + opt.runs * seconds * 40));
  std::vector<std::unique_ptr<Side>> sides;
  for (const char* name : {"sqlite", "pg1", "pg2", "pg3"}) {
    sides.push_back(std::make_unique<Side>());
    sides.back()->name = name;
  }
  start_sqlite_side(*sides[0], fill, log);
  for (int n = 1; n <= 3; ++n) start_pg_side(rig, *sides[static_cast<size_t>(n)], n, fill, log);
  std::map<std::string, std::vector<double>> tput, cpu;
  for (int r = 0; r < opt.runs; ++r) {
    for (auto& side : sides) {  // interleaved: every side sees the same noise
      Phase p = run_phase(*side, seconds);
      tput[side->name].push_back(p.paid_per_s);
      cpu[side->name].push_back(p.cpu_us_per_paid);
      progress(kBench, "run " + std::to_string(r + 1) + " " + side->name + ": " +
                           std::to_string(p.paid_per_s) + " paid/s, " +
                           std::to_string(p.cpu_us_per_paid) + " us agent CPU per paid order, " +
                           "sold out " + std::to_string(p.total.sold_out) + ", errors " +
                           std::to_string(p.total.errors));
    }
  }
  report.add("sqlite_1_agent_paid_orders_per_s", "orders/s", tput["sqlite"]);
  for (int n = 1; n <= 3; ++n) {
    std::string key = "pg" + std::to_string(n);
    std::string name = "postgres_" + std::to_string(n) + "_agents_paid_orders_per_s";
    report.add(name, "orders/s", tput[key]);
    report.compare(name, "sqlite_1_agent_paid_orders_per_s", RatioKind::kPlain);
    report.add("postgres_" + std::to_string(n) + "_agents_cpu_us_per_paid_order", "us", cpu[key],
               Better::kLower);
  }
  report.add("sqlite_1_agent_cpu_us_per_paid_order", "us", cpu["sqlite"], Better::kLower);
  report.note(
      "failover: 3 instances, shipped lease defaults (--lease-ms 3000, --renew-ms "
      "1000), 6 machines; each kill -9 hits the current owner of the next machine; "
      "orders through the other two (following 307s, 0.5 s connect / 2 s read "
      "timeouts, 20 ms apart) until a 201; the killed instance is restarted and the "
      "shards settle before the next kill. The failover_s_* metrics are over all kills "
      "of one run (their 'runs' hold one value), failover_s_each_kill lists them");
  report.note("throughput: " + std::to_string(kClosedLoopClients) +
              " keep-alive closed-loop customers per side, each request to the machine's owner "
              "(no redirect hop), " +
              std::to_string(kMachines) + " machines x " + std::to_string(kSlots) +
              " slots per side, machines paused during the phase; " + std::to_string(seconds) +
              " s per phase, sides interleaved; one PostgreSQL 15 (fsync on, "
              "synchronous_commit on) for every PostgreSQL side; CPU is the agents' only");
}

}  // namespace
}  // namespace vend::bench

int main(int argc, char** argv) {
  return vend::bench::run_bench(argc, argv, vend::bench::kBench, vend::bench::run);
}
