// Benchmark #4 (docs/benchmarks.md): end to end, order -> DISPENSED, through
// mosquitto, with N machines (the real firmware core, simulated motor time
// 0) and the real vend-agent.
//
// Customers order and pay (signed) over HTTP on a fixed schedule (500
// orders/s; a lower rate too when 500 is not sustained). An observer client
// subscribed to every machine's cmd and evt topics stamps the dispense
// command and the DISPENSED result of each order. Measured:
//   order -> DISPENSED      from the scheduled POST /v1/orders to the result
//   command -> DISPENSED    the machine's part: command seen -> result seen
// Baseline in the same run, on the same broker: the raw Paho QoS 1 round
// trip (two PahoTransport clients ping-ponging, as paho_transport_test).
// Also the CPU per MQTT message (cmd + evt, as the observer counts them) of
// the vend-agent process and of the machines' side of this process (the
// fleet's cores and Paho threads, the observer; not the customers' threads).
#include <time.h>

#include <atomic>
#include <barrier>
#include <condition_variable>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "bench_agent_rig.hpp"
#include "bench_util.hpp"
#include "vend/paho_transport.hpp"
#include "vend/protocol.hpp"
#include "vend/topics.hpp"

namespace vend::bench {
namespace {

constexpr const char* kBench = "bench_e2e";
constexpr int kMachines = 25;
constexpr int kSlots = 4;
constexpr int kCapacity = 400;
constexpr int kCustomers = 16;

// Stamps dispense commands and DISPENSED results by order id. Thread-safe
// (Paho's thread writes, the bench reads after the phase).
class Observer {
 public:
  explicit Observer(const std::string& broker, Logger& log) : paho_(options(broker), log) {
    paho_.on_message([this](const Message& m) { seen(m); });
  }
  Status start() {
    if (Status s = paho_.connect(); !s.ok()) return s;
    if (Status s = paho_.subscribe("vend/v1/dev/+/cmd", 1); !s.ok()) return s;
    return paho_.subscribe(topics::all_device_evt(), 1);
  }
  // Command and result times (ns) of an order; 0 when not seen.
  std::pair<int64_t, int64_t> times(const std::string& order_id) {
    std::lock_guard lock(mu_);
    auto c = command_.find(order_id);
    auto d = done_.find(order_id);
    return {c == command_.end() ? 0 : c->second, d == done_.end() ? 0 : d->second};
  }
  // Messages seen so far (commands and events).
  int64_t count() const { return count_.load(); }

 private:
  static PahoOptions options(const std::string& broker) {
    PahoOptions o;
    o.server_uri = broker;
    o.client_id = "bench-observer";
    o.clean_session = true;
    return o;
  }
  void seen(const Message& m) {
    int64_t now = now_ns();
    count_.fetch_add(1);
    if (m.topic.size() > 4 && m.topic.compare(m.topic.size() - 4, 4, "/cmd") == 0) {
      auto c = proto::decode_command(m.payload);
      if (!c.ok()) return;
      if (auto* d = std::get_if<proto::DispenseCommand>(&c->message)) {
        std::lock_guard lock(mu_);
        command_.emplace(d->order_id, now);
      }
      return;
    }
    auto e = proto::decode_event(m.payload);
    if (!e.ok()) return;
    if (auto* r = std::get_if<proto::DispenseResult>(&e->message.body)) {
      if (r->status != proto::DispenseStatus::kDispensed) {
        progress(kBench, "order " + r->order_id + " not dispensed: " + proto::to_string(r->status) +
                             " " + r->reason);
        return;
      }
      std::lock_guard lock(mu_);
      done_.emplace(r->order_id, now);
    }
  }
  PahoTransport paho_;
  std::atomic<int64_t> count_{0};
  std::mutex mu_;
  std::map<std::string, int64_t> command_, done_;
};

struct Sent {
  std::string order_id;
  int64_t scheduled_ns = 0;
};

struct E2eRun {
  double rate = 0;
  int64_t ordered = 0, dispensed = 0, failed_http = 0;
  int64_t no_command = 0, no_result = 0;  // paid, not dispensed in time: where it stopped
  std::vector<int64_t> order_us, device_us;
  int64_t messages = 0;       // cmd + evt seen by the observer
  double agent_cpu_s = 0;     // the vend-agent process
  double machines_cpu_s = 0;  // this process minus the customers' threads
};

double cpu_clock_s(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Customers order + pay at `rate` orders/s for `seconds`; then waits for the
// results and joins them with the observer's stamps.
E2eRun load(AgentServer& server, const Fleet& fleet, Observer& observer, double rate,
            double seconds) {
  std::vector<std::vector<Sent>> sent(kCustomers);
  std::atomic<int64_t> failed{0};
  std::atomic<uint64_t> pay_seq{static_cast<uint64_t>(now_ns())};
  std::barrier start(kCustomers + 1);
  std::atomic<int64_t> end_ns{0};
  std::vector<std::thread> threads;
  std::mutex customers_mu;
  double customers_cpu_s = 0;
  for (int i = 0; i < kCustomers; ++i) {
    threads.emplace_back([&, i] {
      double cpu_start = cpu_clock_s(CLOCK_THREAD_CPUTIME_ID);
      HttpCustomer c(server.http_port(), server.gateway_secret());
      c.get("/healthz");
      std::mt19937_64 rng(static_cast<uint64_t>(i) + 17);
      start.arrive_and_wait();
      while (end_ns.load() == 0) std::this_thread::yield();
      int64_t period = static_cast<int64_t>(kCustomers / rate * 1e9);
      int64_t next = now_ns() + period * i / kCustomers;
      while (next < end_ns.load()) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(next - now_ns()));
        const std::string& device = fleet.ids()[rng() % fleet.ids().size()];
        auto r = c.create_order(device, static_cast<int>(rng() % kSlots) + 1);
        std::string id = r.status == 201 ? json_string(r.body, "id") : "";
        bool paid = !id.empty() &&
                    c.pay(id, "pay-" + std::to_string(pay_seq.fetch_add(1)), 100).status == 200;
        if (paid) {
          sent[i].push_back({id, next});
        } else {
          ++failed;
        }
        next += period;
      }
      std::lock_guard lock(customers_mu);
      customers_cpu_s += cpu_clock_s(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
    });
  }
  int64_t messages_before = observer.count();
  double agent_before = cpu_seconds(server.agent_pid());
  double process_before = cpu_clock_s(CLOCK_PROCESS_CPUTIME_ID);
  start.arrive_and_wait();
  end_ns = now_ns() + static_cast<int64_t>(seconds * 1e9);
  for (auto& t : threads) t.join();
  E2eRun run;
  run.rate = rate;
  run.failed_http = failed;
  std::vector<Sent> all;
  for (auto& v : sent) all.insert(all.end(), v.begin(), v.end());
  run.ordered = static_cast<int64_t>(all.size());
  auto deadline = now_ns() + 5'000'000'000;  // results still on their way
  for (const Sent& s : all) {
    auto [cmd, done] = observer.times(s.order_id);
    while (done == 0 && now_ns() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::tie(cmd, done) = observer.times(s.order_id);
    }
    if (done == 0) {
      ++(cmd == 0 ? run.no_command : run.no_result);
      continue;
    }
    ++run.dispensed;
    run.order_us.push_back((done - s.scheduled_ns) / 1000);
    if (cmd != 0) run.device_us.push_back((done - cmd) / 1000);
  }
  run.messages = observer.count() - messages_before;
  run.agent_cpu_s = cpu_seconds(server.agent_pid()) - agent_before;
  run.machines_cpu_s = cpu_clock_s(CLOCK_PROCESS_CPUTIME_ID) - process_before - customers_cpu_s;
  return run;
}

// The baseline: QoS 1 ping-pong between two Paho clients on `broker`.
Result<std::vector<int64_t>> raw_round_trips(const std::string& broker, int rounds, Logger& log) {
  auto opts = [&](const char* id) {
    PahoOptions o;
    o.server_uri = broker;
    o.client_id = id;
    o.clean_session = true;
    return o;
  };
  PahoTransport ping(opts("bench-rt-ping"), log), pong(opts("bench-rt-pong"), log);
  std::mutex mu;
  std::condition_variable cv;
  std::string last;
  pong.on_message([&pong](const Message& m) { (void)pong.publish({"bench/rt/pong", m.payload}); });
  ping.on_message([&](const Message& m) {
    std::lock_guard lock(mu);
    last = m.payload;
    cv.notify_all();
  });
  for (Status s : {ping.connect(), pong.connect(), ping.subscribe("bench/rt/pong", 1),
                   pong.subscribe("bench/rt/ping", 1)}) {
    if (!s.ok()) return s.error();
  }
  std::vector<int64_t> us;
  for (int i = -5; i < rounds; ++i) {  // 5 warm-up rounds
    std::string id = std::to_string(i);
    int64_t t0 = now_ns();
    if (Status s = ping.publish({"bench/rt/ping", id}); !s.ok()) return s.error();
    std::unique_lock lock(mu);
    if (!cv.wait_for(lock, std::chrono::seconds(2), [&] { return last == id; })) {
      return make_error("bench", "raw round trip lost");
    }
    if (i >= 0) us.push_back((now_ns() - t0) / 1000);
  }
  ping.disconnect();
  pong.disconnect();
  return us;
}

}  // namespace
}  // namespace vend::bench

int main(int argc, char** argv) {
  using namespace vend::bench;
  Options opt = parse_options(argc, argv, kBench);
  Report report(kBench, opt);
  vend::StderrLogger log(vend::LogLevel::kError);
  double seconds = 6.0 * opt.scale;
  auto server = AgentServer::start({});  // as shipped
  if (!server.ok()) {
    std::cerr << kBench << ": " << server.error().to_string() << "\n";
    return 1;
  }
  FleetSpec spec;
  spec.prefix = "e2e";
  spec.machines = kMachines;
  spec.slots = kSlots;
  spec.capacity = kCapacity;
  spec.motor_run_ms = 0;
  spec.step_threads = 2;
  spec.tick_us = 200;
  auto fleet = Fleet::start(spec, **server, log);
  vend::Status filled = fleet.ok() ? (*fleet)->fill(kCapacity, std::chrono::seconds(60))
                                   : vend::Status(fleet.error());
  Observer observer((*server)->broker_url(), log);
  if (vend::Status s = filled.ok() ? observer.start() : filled; !s.ok()) {
    std::cerr << kBench << ": " << s.error().to_string() << "\n";
    return 1;
  }
  std::vector<double> p50, p99, dev50, dev99, rtt50, rtt99, achieved, low_p99;
  std::vector<double> agent_us_per_msg, machines_us_per_msg;
  double low_rate = 0;
  for (int run = 0; run < opt.runs; ++run) {
    auto rtt = raw_round_trips((*server)->broker_url(), 200, log);
    if (!rtt.ok()) {
      std::cerr << kBench << ": " << rtt.error().to_string() << "\n";
      return 1;
    }
    E2eRun r = load(**server, **fleet, observer, 500, seconds);
    progress(kBench, "run " + std::to_string(run + 1) + " at 500/s: paid " +
                         std::to_string(r.ordered) + ", dispensed " + std::to_string(r.dispensed) +
                         " (missing: no command " + std::to_string(r.no_command) + ", no result " +
                         std::to_string(r.no_result) + "), HTTP failures " +
                         std::to_string(r.failed_http) + ", P99 " +
                         std::to_string(percentile_ms(r.order_us, 99)) + " ms; raw RTT P50 " +
                         std::to_string(percentile_ms(*rtt, 50)) + " ms; " +
                         std::to_string(r.messages) + " messages");
    if (r.messages > 0) {
      auto per_msg = [&](double s) { return s * 1e6 / static_cast<double>(r.messages); };
      agent_us_per_msg.push_back(per_msg(r.agent_cpu_s));
      machines_us_per_msg.push_back(per_msg(r.machines_cpu_s));
    }
    p50.push_back(percentile_ms(r.order_us, 50));
    p99.push_back(percentile_ms(r.order_us, 99));
    dev50.push_back(percentile_ms(r.device_us, 50));
    dev99.push_back(percentile_ms(r.device_us, 99));
    rtt50.push_back(percentile_ms(*rtt, 50));
    rtt99.push_back(percentile_ms(*rtt, 99));
    achieved.push_back(static_cast<double>(r.dispensed) / seconds);
    bool sustained = r.dispensed >= r.ordered && r.ordered >= 500 * seconds * 0.95;
    if (!sustained) {  // step down once per run, to say what the machine can do
      low_rate = 250;
      E2eRun low = load(**server, **fleet, observer, low_rate, seconds);
      low_p99.push_back(percentile_ms(low.order_us, 99));
      progress(kBench, "  step down to 250/s: dispensed " + std::to_string(low.dispensed) +
                           ", P99 " + std::to_string(low_p99.back()) + " ms");
    }
  }
  report.add("order_to_dispensed_p50_ms_at_500_per_s", "ms", p50, Better::kLower);
  report.add("order_to_dispensed_p99_ms_at_500_per_s", "ms", p99, Better::kLower);
  report.add("command_to_dispensed_p50_ms", "ms", dev50, Better::kLower);
  report.add("command_to_dispensed_p99_ms", "ms", dev99, Better::kLower);
  report.add("baseline_raw_qos1_round_trip_p50_ms", "ms", rtt50, Better::kLower);
  report.add("baseline_raw_qos1_round_trip_p99_ms", "ms", rtt99, Better::kLower);
  report.add("dispensed_per_s", "orders/s", achieved);
  report.add("agent_cpu_us_per_message", "us", agent_us_per_msg, Better::kLower);
  report.add("machines_cpu_us_per_message", "us", machines_us_per_msg, Better::kLower);
  report.compare("order_to_dispensed_p50_ms_at_500_per_s", "baseline_raw_qos1_round_trip_p50_ms",
                 RatioKind::kPlain);
  report.compare("command_to_dispensed_p50_ms", "baseline_raw_qos1_round_trip_p50_ms",
                 RatioKind::kPlain);
  report.compare("command_to_dispensed_p99_ms", "baseline_raw_qos1_round_trip_p99_ms",
                 RatioKind::kPlain);
  report.target_value("order_to_dispensed_p99_ms_at_500_per_s", 20);
  {
    double ratio = report.at("command_to_dispensed_p50_ms").ratio.value_or(0);
    report.target("command_to_dispensed_p50_ms", "overhead over the raw round trip < 3x",
                  ratio > 0 && ratio < 3);
  }
  if (!low_p99.empty()) {
    report.add("order_to_dispensed_p99_ms_at_250_per_s", "ms", low_p99, Better::kLower);
    report.note("500 orders/s was not sustained in some run: stepped down to 250 orders/s");
  }
  report.note(std::to_string(kMachines) + " machines x " + std::to_string(kSlots) +
              " slots (real firmware cores, motor time 0, stepped every 1 ms), one vend-agent "
              "(--sync full), one mosquitto; " +
              std::to_string(kCustomers) +
              " keep-alive customers order + pay on a fixed schedule, " + std::to_string(seconds) +
              " s per run");
  report.note(
      "order_to_dispensed: scheduled POST /v1/orders -> DISPENSED result seen on the "
      "broker (reserve, durable payment, dispatch, machine, result); "
      "command_to_dispensed: dispense command seen -> result seen (the machine's part); "
      "ratios are plain (metric / raw round trip)");
  report.note(
      "baseline: 200 QoS 1 ping-pongs between two PahoTransport clients on the same "
      "broker, measured before each load run");
  report.note(
      "cpu per message: CPU time over the 500/s phase (until the last result) / the "
      "commands and events the observer saw; agent = the vend-agent process, machines = "
      "this process minus the customers' threads (fleet cores, Paho threads, observer)");
  return report.finish();
}
