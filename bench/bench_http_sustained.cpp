// Benchmark #3 (docs/benchmarks.md): sustained reserve + payment over HTTP
// against the real vend-agent with durable group commit (--sync full,
// the default), across 1,000 slots (50 machines x 20 slots: each machine's
// shipped rate limit, 200 orders/s, stays above what the customers ask of it).
//
// Baseline in the same run: the same agent binary and load with one fsync
// per request (--repo-batch-max 1: every write is its own transaction).
// Both agents run side by side (own broker, own fleet); their measurements
// alternate so both see the same machine noise.
//
// Two phases per run and agent:
//   throughput  kClosedLoopClients keep-alive customers order and pay as fast
//               as answers come: paid orders/s (a 200 to the payment). The
//               customers are connections on one client thread
//               (EventCustomers), as in benchmark 2: 64 phones are not 64
//               threads on the agent's two cores. Once more for the group
//               agent with a client thread per customer, as measured until
//               2026-12-05 (paid_orders_per_s_thread_per_customer).
//   latency     1,000 orders/s on a fixed schedule (kPacedClients customers):
//               P99 of one order = reserve + payment, from the scheduled time.
#include <atomic>
#include <barrier>
#include <iostream>
#include <map>
#include <random>
#include <thread>

#include "bench_agent_rig.hpp"
#include "bench_util.hpp"
#include "event_customers.hpp"

namespace vend::bench {
namespace {

constexpr const char* kBench = "bench_http_sustained";
constexpr int kMachines = 50;
constexpr int kSlotsPerMachine = 20;  // 1,000 slots
constexpr int kClosedLoopClients = 64;
constexpr int kPacedClients = 32;
constexpr double kPacedRate = 1000;

struct Phase {
  double paid_per_s = 0;
  double agent_cpu_us_per_paid = 0;  // the agent's CPU time (user + system) per paid order
  double agent_cores = 0;            // CPU the agent got: cores busy on average
  double order_p50_ms = 0, order_p99_ms = 0, pay_p99_ms = 0, reserve_p99_ms = 0;
  int64_t paid = 0, sold_out = 0, errors = 0;
  std::map<int, int64_t> error_statuses;  // what the errors were (0: no answer)
};

struct Side {
  std::string name;
  std::unique_ptr<AgentServer> server;
  std::unique_ptr<Fleet> fleet;
  std::atomic<uint64_t> payment_seq{0};
};

// One customer's samples, merged after the phase.
struct Samples {
  std::vector<int64_t> order_us, reserve_us, pay_us;
  int64_t paid = 0, sold_out = 0, errors = 0;
  std::map<int, int64_t> error_statuses;
};

// Reserves a random slot and pays for it; records both latencies.
void order_and_pay(HttpCustomer& c, Side& side, std::mt19937_64& rng, int64_t t0, Samples& s) {
  const auto& ids = side.fleet->ids();
  const std::string& device = ids[rng() % ids.size()];
  int slot = static_cast<int>(rng() % kSlotsPerMachine) + 1;
  int64_t t_send = now_ns();
  auto r = c.create_order(device, slot);
  int64_t t_reserved = now_ns();
  s.reserve_us.push_back((t_reserved - t_send) / 1000);
  if (r.status != 201) {
    if (r.status == 409) {
      ++s.sold_out;
    } else {
      ++s.errors;
      ++s.error_statuses[r.status];
    }
    return;
  }
  std::string pay_id = "pay-" + std::to_string(side.payment_seq.fetch_add(1));
  auto p = c.pay(json_string(r.body, "id"), pay_id, 100);
  int64_t t_paid = now_ns();
  s.pay_us.push_back((t_paid - t_reserved) / 1000);
  s.order_us.push_back((t_paid - t0) / 1000);
  if (p.status == 200) {
    ++s.paid;
  } else {
    ++s.errors;
    ++s.error_statuses[p.status];
  }
}

// A phase's figures from its merged samples, its length and the agent's CPU.
Phase summarize(const Samples& all, double elapsed_s, double agent_cpu_s) {
  Phase p;
  p.paid = all.paid, p.sold_out = all.sold_out, p.errors = all.errors;
  p.error_statuses = all.error_statuses;
  p.paid_per_s = static_cast<double>(all.paid) / elapsed_s;
  p.agent_cpu_us_per_paid = all.paid > 0 ? agent_cpu_s * 1e6 / static_cast<double>(all.paid) : 0;
  p.agent_cores = agent_cpu_s / elapsed_s;
  p.order_p50_ms = percentile_ms(all.order_us, 50);
  p.order_p99_ms = percentile_ms(all.order_us, 99);
  p.pay_p99_ms = percentile_ms(all.pay_us, 99);
  p.reserve_p99_ms = percentile_ms(all.reserve_us, 99);
  return p;
}

// `rate` > 0: paced (each client on its own schedule); 0: closed loop.
Phase run_phase(Side& side, int clients, double rate, double seconds) {
  std::vector<Samples> samples(static_cast<size_t>(clients));
  std::barrier start(clients + 1);
  std::atomic<int64_t> end_ns{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      HttpCustomer c(side.server->http_port(), side.server->gateway_secret());
      c.get("/healthz");  // connected before the clock starts
      std::mt19937_64 rng(static_cast<uint64_t>(i) * 7919 + side.payment_seq.load());
      Samples& s = samples[static_cast<size_t>(i)];
      start.arrive_and_wait();
      while (end_ns.load() == 0) std::this_thread::yield();
      int64_t period = rate > 0 ? static_cast<int64_t>(clients / rate * 1e9) : 0;
      int64_t next = now_ns() + period * i / clients;
      while (now_ns() < end_ns.load()) {
        int64_t t0 = now_ns();
        if (period > 0) {
          std::this_thread::sleep_for(std::chrono::nanoseconds(next - t0));
          t0 = next;
          next += period;
        }
        order_and_pay(c, side, rng, t0, s);
      }
    });
  }
  start.arrive_and_wait();
  double cpu_start = cpu_seconds(side.server->agent_pid());
  int64_t t_start = now_ns();
  end_ns = t_start + static_cast<int64_t>(seconds * 1e9);
  for (auto& t : threads) t.join();
  double elapsed = static_cast<double>(now_ns() - t_start) * 1e-9;
  double cpu = cpu_seconds(side.server->agent_pid()) - cpu_start;
  Samples all;
  for (auto& s : samples) {
    all.order_us.insert(all.order_us.end(), s.order_us.begin(), s.order_us.end());
    all.reserve_us.insert(all.reserve_us.end(), s.reserve_us.begin(), s.reserve_us.end());
    all.pay_us.insert(all.pay_us.end(), s.pay_us.begin(), s.pay_us.end());
    all.paid += s.paid, all.sold_out += s.sold_out, all.errors += s.errors;
    for (const auto& [status, n] : s.error_statuses) all.error_statuses[status] += n;
  }
  return summarize(all, elapsed, cpu);
}

// The closed loop with the customers on one client thread (EventCustomers):
// each of `clients` keep-alive connections orders a random slot, pays a 201
// at once, and orders again, until `seconds` pass. Latencies are from each
// request's write to its whole answer.
Phase run_closed_loop_events(Side& side, int clients, double seconds) {
  auto conns = EventCustomers::connect(side.server->http_port(), static_cast<size_t>(clients));
  if (!conns.ok()) {
    Phase failed;
    failed.errors = 1;
    failed.error_statuses[0] = 1;  // no answer
    return failed;
  }
  const auto& ids = side.fleet->ids();
  const std::string& secret = side.server->gateway_secret();
  std::mt19937_64 rng(side.payment_seq.load() * 7919 + 17);
  struct Customer {
    bool paying = false;     // the last request was a payment
    int64_t order_sent = 0;  // when its order was written
    uint64_t orders = 0;
  };
  std::vector<Customer> customers(static_cast<size_t>(clients));
  Samples s;
  int64_t t_end = 0;
  auto order = [&](size_t c) {
    const std::string& device = ids[rng() % ids.size()];
    int slot = static_cast<int>(rng() % kSlotsPerMachine) + 1;
    std::string body = R"({"device":")" + device + R"(","slot":)" + std::to_string(slot) + "}";
    customers[c].paying = false;
    customers[c].order_sent = now_ns();
    return http_request(
        "POST", "/v1/orders",
        {"X-Client-Id: loop-" + std::to_string(c) + "-" + std::to_string(++customers[c].orders)},
        body);
  };
  auto script = [&](size_t c, const std::vector<Exchange>& answers) -> std::string {
    Customer& me = customers[c];
    if (!answers.empty()) {
      const Exchange& last = answers.back();
      if (me.paying) {
        s.pay_us.push_back(last.latency_us());
        s.order_us.push_back((last.done_ns - me.order_sent) / 1000);
        if (last.status == 200) {
          ++s.paid;
        } else {
          ++s.errors;
          ++s.error_statuses[last.status];
        }
      } else {
        s.reserve_us.push_back(last.latency_us());
        if (last.status == 201) {
          me.paying = true;
          return payment_request(secret, json_string(last.body, "id"),
                                 "pay-" + std::to_string(side.payment_seq.fetch_add(1)), 100);
        }
        ++(last.status == 409 ? s.sold_out : s.errors);
        if (last.status != 409) ++s.error_statuses[last.status];
      }
    }
    return now_ns() < t_end ? order(c) : std::string();
  };
  double cpu_start = cpu_seconds(side.server->agent_pid());
  int64_t t_start = now_ns();
  t_end = t_start + static_cast<int64_t>(seconds * 1e9);
  auto answered = conns->run(script, static_cast<int64_t>(seconds * 1000) + 30'000);
  double elapsed = static_cast<double>(now_ns() - t_start) * 1e-9;
  // A connection that closed or timed out ends its customer without a
  // further call of the script: its last exchange is counted here.
  for (const auto& exchanges : answered) {
    if (!exchanges.empty() && exchanges.back().status == 0) {
      ++s.errors;
      ++s.error_statuses[0];
    }
  }
  return summarize(s, elapsed, cpu_seconds(side.server->agent_pid()) - cpu_start);
}

Status start_side(Side& side, const std::vector<std::string>& extra, int fill, Logger& log) {
  std::vector<std::string> args = extra;  // otherwise as shipped
  auto server = AgentServer::start(args);
  if (!server.ok()) return server.error();
  side.server = std::move(server).value();
  FleetSpec spec;
  spec.prefix = side.name;
  spec.machines = kMachines;
  spec.slots = kSlotsPerMachine;
  spec.capacity = fill;
  spec.step_threads = 2;
  spec.tick_us = 5000;
  auto fleet = Fleet::start(spec, *side.server, log);
  if (!fleet.ok()) return fleet.error();
  side.fleet = std::move(fleet).value();
  if (Status s = side.fleet->fill(fill, std::chrono::seconds(120)); !s.ok()) return s;
  side.fleet->pause(true);  // the machines' ledgers stay out of the measurement
  return {};
}

std::string describe(const std::string& side, const std::string& phase, const Phase& p) {
  std::string statuses;
  for (const auto& [status, n] : p.error_statuses) {
    statuses += (statuses.empty() ? " (" : ", ") + std::to_string(n) + " x " +
                (status == 0 ? std::string("no answer") : std::to_string(status));
  }
  if (!statuses.empty()) statuses += ")";
  return side + " " + phase + ": " + std::to_string(p.paid_per_s) + " paid/s, order P99 " +
         std::to_string(p.order_p99_ms) + " ms (reserve P99 " + std::to_string(p.reserve_p99_ms) +
         ", pay P99 " + std::to_string(p.pay_p99_ms) + "), sold out " + std::to_string(p.sold_out) +
         ", errors " + std::to_string(p.errors) + statuses + "; agent " +
         std::to_string(p.agent_cpu_us_per_paid) + " us CPU per paid order, " +
         std::to_string(p.agent_cores) + " cores";
}

}  // namespace
}  // namespace vend::bench

int main(int argc, char** argv) {
  using namespace vend::bench;
  Options opt = parse_options(argc, argv, kBench);
  Report report(kBench, opt);
  vend::StderrLogger log(vend::LogLevel::kError);
  double seconds = 3.0 * opt.scale;
  // Tokens per slot: enough for every run of the group-commit agent at up
  // to ~10,000 paid orders/s; the baseline needs far fewer.
  int fill = static_cast<int>(std::min<int64_t>(1000, 20 + opt.runs * seconds * 24));
  Side group, single;
  group.name = "group";
  single.name = "single";
  Stopwatch setup;
  if (vend::Status s = start_side(group, {"--sync", "full"}, fill, log); !s.ok()) {
    std::cerr << kBench << ": group-commit agent: " << s.error().to_string() << "\n";
    return 1;
  }
  if (vend::Status s = start_side(single, {"--sync", "full", "--repo-batch-max", "1"},
                                  std::max(20, fill / 4), log);
      !s.ok()) {
    std::cerr << kBench << ": one-fsync agent: " << s.error().to_string() << "\n";
    return 1;
  }
  progress(kBench, "set-up (2 agents, 2 x 1000 slots, filled) took " +
                       std::to_string(setup.elapsed_s()) + " s");
  std::vector<double> cpu_g, cpu_s, cores_g, tp_g, tp_s, tp_threads, p99_g, p99_s, p50_g, p50_s,
      pay99_g, pay99_s;
  for (int run = 0; run < opt.runs; ++run) {
    Phase a = run_closed_loop_events(group, kClosedLoopClients, seconds);
    Phase b = run_closed_loop_events(single, kClosedLoopClients, seconds);
    Phase e = run_phase(group, kClosedLoopClients, 0, seconds);
    Phase c = run_phase(group, kPacedClients, kPacedRate, seconds);
    Phase d = run_phase(single, kPacedClients, kPacedRate, seconds);
    for (auto& [side, phase, p] : {std::tuple{"group", "closed loop", &a},
                                   {"single", "closed loop", &b},
                                   {"group", "closed loop, a client thread per customer", &e},
                                   {"group", "1000/s", &c},
                                   {"single", "1000/s", &d}}) {
      progress(kBench, "run " + std::to_string(run + 1) + " " + describe(side, phase, *p));
    }
    tp_g.push_back(a.paid_per_s), tp_s.push_back(b.paid_per_s);
    tp_threads.push_back(e.paid_per_s);
    cpu_g.push_back(a.agent_cpu_us_per_paid), cpu_s.push_back(b.agent_cpu_us_per_paid);
    cores_g.push_back(a.agent_cores);
    p99_g.push_back(c.order_p99_ms), p99_s.push_back(d.order_p99_ms);
    p50_g.push_back(c.order_p50_ms), p50_s.push_back(d.order_p50_ms);
    pay99_g.push_back(c.pay_p99_ms), pay99_s.push_back(d.pay_p99_ms);
  }
  report.add("paid_orders_per_s", "orders/s", tp_g);
  report.add("baseline_one_fsync_paid_orders_per_s", "orders/s", tp_s);
  report.add("paid_orders_per_s_thread_per_customer", "orders/s", tp_threads);
  report.add("order_p99_ms_at_1000_per_s", "ms", p99_g, Better::kLower);
  report.add("baseline_one_fsync_order_p99_ms_at_1000_per_s", "ms", p99_s, Better::kLower);
  report.add("order_p50_ms_at_1000_per_s", "ms", p50_g, Better::kLower);
  report.add("baseline_one_fsync_order_p50_ms_at_1000_per_s", "ms", p50_s, Better::kLower);
  report.add("pay_p99_ms_at_1000_per_s", "ms", pay99_g, Better::kLower);
  report.add("baseline_one_fsync_pay_p99_ms_at_1000_per_s", "ms", pay99_s, Better::kLower);
  report.add("agent_cpu_us_per_paid_order", "us", cpu_g, Better::kLower);
  report.add("baseline_one_fsync_agent_cpu_us_per_paid_order", "us", cpu_s, Better::kLower);
  report.add("agent_cores_busy_closed_loop", "cores", cores_g);
  report.compare("paid_orders_per_s", "baseline_one_fsync_paid_orders_per_s");
  report.compare("agent_cpu_us_per_paid_order", "baseline_one_fsync_agent_cpu_us_per_paid_order");
  report.compare("order_p99_ms_at_1000_per_s", "baseline_one_fsync_order_p99_ms_at_1000_per_s");
  report.compare("order_p50_ms_at_1000_per_s", "baseline_one_fsync_order_p50_ms_at_1000_per_s");
  report.compare("pay_p99_ms_at_1000_per_s", "baseline_one_fsync_pay_p99_ms_at_1000_per_s");
  report.target_value("paid_orders_per_s", 5000);
  report.target_value("order_p99_ms_at_1000_per_s", 10);
  report.note(
      "1,000 slots = 50 machines x 20 slots (real firmware cores, paused during the "
      "measurement so their ledgers do not compete for the CPU); each agent has its own "
      "mosquitto; --sync full (the default); HTTP server as shipped");
  report.note("throughput: " + std::to_string(kClosedLoopClients) +
              " keep-alive customers on one client thread (and, for "
              "paid_orders_per_s_thread_per_customer, a thread each), closed loop, reserve a "
              "random slot then pay (signed); "
              "latency: 1000 orders/s on a fixed schedule over " +
              std::to_string(kPacedClients) +
              " customers, order = reserve + pay, from the scheduled send time; " +
              std::to_string(seconds) + " s per phase");
  report.note(
      "baseline: the same vend-agent with --repo-batch-max 1 (one transaction, one "
      "fsync, per write)");
  return report.finish();
}
