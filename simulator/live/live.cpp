// The live run: services, fleet, people, progress, settling, the check.
#include "live/live.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iostream>
#include <sstream>
#include <thread>

#include "live/live_http.hpp"
#include "live/live_machine.hpp"
#include "live/live_processes.hpp"
#include "live/live_report.hpp"
#include "live/live_workload.hpp"
#include "vend/log.hpp"
#include "vend/secret_file.hpp"
#include "world/work_dir.hpp"

namespace vend::sim {

namespace {

// The password of machine `id` on a broker with credentials: the one line of
// dir/<id>, as the firmware reads its password_file. dir "" = anonymous.
Result<std::optional<std::string>> machine_password(const std::string& dir, const std::string& id) {
  if (dir.empty()) return std::optional<std::string>{};
  auto password = read_secret_line(dir + "/" + id,
                                   "--mqtt-password-dir: the password file of " + id, "bad_usage");
  if (!password.ok()) return password.error();
  return std::optional<std::string>{*password};
}

// A secret given on the command line, else read from its file.
Result<std::string> secret_option(const std::string& value, const std::string& file,
                                  const std::string& option) {
  if (file.empty()) return value;
  return read_secret_line(file, option, "bad_usage");
}

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

std::atomic<bool> g_stop{false};  // set by SIGINT/SIGTERM: the shell's one global
extern "C" void on_stop_signal(int) { g_stop = true; }

constexpr int64_t kTickMs = 20;
constexpr int kMaxCoreThreads = 4;

// How to run vendctl from here: the build tree's vendctl beside this
// vend-sim (<build>/simulator/vend-sim -> <build>/vendctl/vendctl), else the
// one on PATH.
std::string vendctl_command() {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "vendctl";
  auto sibling = self.parent_path().parent_path() / "vendctl" / "vendctl";
  return std::filesystem::exists(sibling, ec) ? sibling.string() : "vendctl";
}

std::string read_trimmed(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  return s;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class LiveRun {
 public:
  LiveRun(const Command& c, std::string dir) : c_(c), o_(c.live), dir_(std::move(dir)) {}
  ~LiveRun() { shut_down(); }
  int run();

 private:
  Status start_services();
  Status start_fleet();
  void core_loop(size_t first, size_t stride);
  void inject_faults(LiveMachine& m, uint64_t& rng);
  void show_progress(Clock::time_point start, bool final_line);
  void sell();
  void settle();
  void shut_down();
  LiveReport check_and_report(double seconds);

  const Command& c_;
  LiveOptions o_;
  std::string dir_;
  StderrLogger log_{LogLevel::kError};
  LaunchedServices services_;
  AgentEndpoint endpoint_;
  std::string broker_;
  std::vector<std::unique_ptr<LiveMachine>> machines_;
  std::unique_ptr<LiveWorkload> workload_;
  std::vector<std::thread> core_threads_;
  std::atomic<bool> cores_run_{false};
  std::atomic<bool> faults_on_{false};
  std::atomic<int64_t> crashes_{0}, offline_{0};
  int64_t agent_restarts_ = 0;
  bool shut_ = false;
};

Status LiveRun::start_services() {
  if (!o_.launch) {
    auto e = AgentEndpoint::parse(o_.agent_url);
    if (!e.ok()) return e.error();
    endpoint_ = *e;
    auto token = secret_option(o_.operator_token, o_.operator_token_file, "--operator-token-file");
    if (!token.ok()) return token.error();
    auto secret = secret_option(o_.gateway_secret, o_.gateway_secret_file, "--gateway-secret-file");
    if (!secret.ok()) return secret.error();
    endpoint_.operator_token = *token;
    endpoint_.gateway_secret = *secret;
    broker_ = o_.broker_url;
    return {};
  }
  if (Status s = launch_broker(dir_, o_.mosquitto_bin, services_); !s.ok()) return s;
  if (Status s =
          launch_agent(dir_, o_.agent_bin, o_.reservation_ttl_s, o_.dispatch_ttl_s, services_);
      !s.ok()) {
    return s;
  }
  std::ofstream(dir_ + "/mosquitto.pid") << services_.mosquitto->pid() << "\n";
  std::ofstream(dir_ + "/vend-agent.pid") << services_.agent->pid() << "\n";
  endpoint_.port = services_.http_port;
  endpoint_.operator_token = read_trimmed(dir_ + "/operator.token");
  endpoint_.gateway_secret = read_trimmed(dir_ + "/gateway.secret");
  broker_ = "tcp://127.0.0.1:" + std::to_string(services_.mqtt_port);
  std::cerr << "vend-sim: mosquitto on " << broker_
            << ", vend-agent on http://127.0.0.1:" << services_.http_port
            << " (logs and databases in " << dir_ << ")\n"
            << "  watch it live:  " << vendctl_command() << " watch --mqtt " << broker_ << "\n"
            << "  or raw:         mosquitto_sub -h 127.0.0.1 -p " << services_.mqtt_port
            << " -t 'vend/v1/#' -v\n"
            << "  ask the agent:  curl -s http://127.0.0.1:" << services_.http_port << "/metrics\n"
            << "  the console:    http://127.0.0.1:" << services_.http_port
            << "/console/  (log in with the operator token " << endpoint_.operator_token
            << ", from " << dir_ << "/operator.token)\n";
  return {};
}

Status LiveRun::start_fleet() {
  AgentClient client(endpoint_, "sim-provisioner");
  uint64_t run_id = o_.seed * 0x9e3779b97f4a7c15ULL;
  char prefix[64];
  std::snprintf(prefix, sizeof prefix, "sim-%06llx", static_cast<unsigned long long>(run_id >> 40));
  if (!o_.id_prefix.empty()) std::snprintf(prefix, sizeof prefix, "%s", o_.id_prefix.c_str());
  std::vector<std::string> ids;
  for (int i = 0; i < o_.machines; ++i) {
    char id[80];
    std::snprintf(id, sizeof id, "%s-%03d", prefix, i + 1);
    auto password = machine_password(o_.mqtt_password_dir, id);
    if (!password.ok()) return password.error();
    std::vector<SlotDef> defs;
    std::vector<fw::SlotConfig> slots;
    for (int s = 1; s <= o_.slots; ++s) {
      defs.push_back({s, "product-" + std::to_string(s), 100 + 10 * s, o_.capacity});
      slots.push_back({s, o_.capacity, "product-" + std::to_string(s), -1});
    }
    auto key_hex = client.provision(id, defs);
    if (!key_hex.ok()) return key_hex.error();
    auto key = crypto::Key::from_hex(*key_hex);
    if (!key.ok()) return key.error();
    fw::CoreOptions core;
    core.auto_confirm_restock = true;
    core.reconnect_jitter_max_ms = 1000;
    core.retransmit_ms = 5000;
    core.snapshot_interval_ms = 60000;
    LiveMachineSetup setup{id,
                           *key,
                           dir_ + "/" + ledger_file_name(id),
                           broker_,
                           slots,
                           core,
                           fw::SimulatedMachineOptions{500, o_.jam},
                           o_.duplicate,
                           o_.seed + static_cast<uint64_t>(i) * 7919};
    setup.mqtt_password = *password;
    setup.mqtt_ca_file = o_.mqtt_ca_file;
    machines_.push_back(std::make_unique<LiveMachine>(std::move(setup), log_));
    if (Status s = machines_.back()->boot(); !s.ok()) return s;
    ids.push_back(id);
  }
  std::vector<std::future<Status>> connects;  // in parallel: a Paho connect takes ~1 s
  for (auto& m : machines_) {
    connects.push_back(std::async(std::launch::async, [&m] { return m->connect_blocking(); }));
  }
  for (auto& f : connects) {
    if (Status s = f.get(); !s.ok()) return s;
  }
  cores_run_ = true;
  size_t threads = std::min<size_t>(kMaxCoreThreads, machines_.size());
  for (size_t t = 0; t < threads; ++t) {
    core_threads_.emplace_back([this, t, threads] { core_loop(t, threads); });
  }
  workload_ = std::make_unique<LiveWorkload>(o_, endpoint_, ids);
  return {};
}

void LiveRun::inject_faults(LiveMachine& m, uint64_t& rng) {
  if (!faults_on_ || m.faulted()) return;
  auto chance = [&rng](double per_min) {
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<double>(rng >> 11) / 9007199254740992.0 < per_min * kTickMs / 60000.0;
  };
  int64_t down_ms = 2000 + static_cast<int64_t>(rng % 4000);
  if (chance(o_.crash_per_min)) {
    m.crash(down_ms);
    ++crashes_;
  } else if (chance(o_.offline_per_min)) {
    m.go_offline(down_ms);
    ++offline_;
  }
}

void LiveRun::core_loop(size_t first, size_t stride) {
  uint64_t rng = o_.seed + first * 31 + 1;
  auto next = Clock::now();
  while (cores_run_) {
    for (size_t i = first; i < machines_.size(); i += stride) {
      machines_[i]->step();
      inject_faults(*machines_[i], rng);
    }
    next += milliseconds(kTickMs);
    std::this_thread::sleep_until(next);
    if (Clock::now() > next + milliseconds(500)) next = Clock::now();  // fell behind: no burst
  }
}

void LiveRun::show_progress(Clock::time_point start, bool final_line) {
  if (!o_.progress) return;
  const LiveCounters& k = workload_->counters();
  int online = 0;
  for (auto& m : machines_) online += m->online() ? 1 : 0;
  double t = seconds_since(start);
  char line[256];
  std::snprintf(
      line, sizeof line,
      "[%5.0fs] %6.1f orders/s | in flight %4lld | dispensed %6lld | expired %5lld | "
      "failed %4lld | online %d/%zu",
      t, t > 0 ? k.orders / t : 0.0, static_cast<long long>(k.in_flight.load()),
      static_cast<long long>(k.completed.load()), static_cast<long long>(k.expired.load()),
      static_cast<long long>(k.refunded.load()) + static_cast<long long>(k.needs_review.load()),
      online, machines_.size());
  bool tty = ::isatty(STDERR_FILENO);
  std::cerr << (tty ? "\r" : "") << line << (tty && !final_line ? "" : "\n") << std::flush;
}

void LiveRun::sell() {
  workload_->start_service();
  workload_->start_customers();
  faults_on_ = true;
  auto start = Clock::now();
  auto last_restart = start;
  int64_t tick = 0;
  bool tty = ::isatty(STDERR_FILENO);
  while (!g_stop && seconds_since(start) < o_.duration_s) {
    std::this_thread::sleep_for(milliseconds(250));
    if (++tick % (tty ? 4 : 20) == 0) show_progress(start, false);
    if (o_.launch && o_.agent_restart_s > 0 && seconds_since(last_restart) >= o_.agent_restart_s) {
      if (Status s = restart_agent(services_); !s.ok())
        std::cerr << "\nvend-sim: " << s.error().to_string() << "\n";
      std::ofstream(dir_ + "/vend-agent.pid") << services_.agent->pid() << "\n";
      ++agent_restarts_;
      last_restart = Clock::now();
    }
  }
  faults_on_ = false;
  workload_->stop_customers();
  show_progress(start, true);
}

// Waits until every tracked order has finished and every machine is back
// online with an empty outbox (or the settle timeout passes).
void LiveRun::settle() {
  auto start = Clock::now();
  while (!g_stop && seconds_since(start) < o_.settle_timeout_s) {
    bool quiet = workload_->counters().in_flight == 0;
    for (auto& m : machines_) quiet = quiet && m->online() && m->outbox_depth() == 0;
    if (quiet) return;
    std::this_thread::sleep_for(milliseconds(200));
  }
}

void LiveRun::shut_down() {
  if (shut_) return;
  shut_ = true;
  if (workload_) workload_->stop();
  cores_run_ = false;
  for (auto& t : core_threads_) t.join();
  core_threads_.clear();
  std::vector<std::future<void>> stops;  // each waits up to ~1 s for its in-flight messages
  for (auto& m : machines_) stops.push_back(std::async(std::launch::async, [&m] { m->stop(); }));
  for (auto& f : stops) f.wait();
  machines_.clear();
  if (services_.agent) services_.agent->stop();  // the agent commits everything on SIGTERM
  if (services_.mosquitto) services_.mosquitto->stop();
}

LiveReport LiveRun::check_and_report(double seconds) {
  LiveReport r;
  const LiveCounters& k = workload_->counters();
  r.machines = o_.machines;
  r.slots = o_.slots;
  r.seconds = seconds;
  r.orders = k.orders, r.refused = k.refused, r.http_errors = k.http_errors, r.paid = k.paid;
  r.double_payments = k.double_payments, r.abandoned = k.abandoned, r.completed = k.completed;
  r.expired = k.expired, r.refunded = k.refunded, r.needs_review = k.needs_review;
  r.unfinished = k.in_flight, r.restocks = k.restocks, r.retried = k.retried;
  r.agents = static_cast<int>(endpoint_.addresses().size());
  r.machine_crashes = crashes_, r.offline_events = offline_, r.agent_restarts = agent_restarts_;
  r.latencies_ms = workload_->latencies();
  r.work_dir = dir_;
  FleetFiles files = fleet_files_in(dir_);
  files.agent_db = o_.launch ? dir_ + "/" + kAgentDbName : o_.agent_db;
  if (files.agent_db.rfind("postgresql://", 0) == 0 ||
      files.agent_db.rfind("postgres://", 0) == 0) {
    r.agent_db_not_checked =
        "the agent database is on PostgreSQL: its part of the check is not run";
    files.agent_db.clear();
  }
  r.checked_agent_db = !files.agent_db.empty();
  shut_down();  // machines and agent stopped: their files are complete
  r.unsettled_paid = workload_->unsettled_paid();
  r.oversold = workload_->oversold();
  InvariantChecker checker(files);
  auto violations = checker.check(CheckPhase::kSettled);
  if (!violations.ok()) {
    r.check_error = true;
    r.check_error_text = violations.error().to_string();
  } else {
    r.violations = *violations;
  }
  return r;
}

int LiveRun::run() {
  if (Status s = start_services(); !s.ok()) {
    std::cerr << "vend-sim: " << s.error().to_string() << "\n";
    return 2;
  }
  if (Status s = start_fleet(); !s.ok()) {
    std::cerr << "vend-sim: fleet: " << s.error().to_string() << "\n";
    return 2;
  }
  auto start = Clock::now();
  sell();
  double seconds = seconds_since(start);
  settle();
  LiveReport report = check_and_report(seconds);
  std::cout << (c_.json ? report.json() + "\n" : report.human()) << std::flush;
  return report.ok() ? 0 : 1;
}

}  // namespace

int run_live(const Command& command) {
  Command c = command;
  if (c.live.seed == 0) {
    c.live.seed = static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  }
  signal(SIGINT, on_stop_signal);
  signal(SIGTERM, on_stop_signal);
  signal(SIGPIPE, SIG_IGN);
  std::string dir_path = c.work_dir;
  auto dir = WorkDir::make(dir_path);
  if (!dir.ok()) {
    std::cerr << "vend-sim: " << dir.error().to_string() << "\n";
    return 2;
  }
  LiveRun run(c, dir->path());
  return run.run();
}

}  // namespace vend::sim
