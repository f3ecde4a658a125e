#include "fleet_scale_hosts.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "bench_util.hpp"
#include "fleet_scale_seed.hpp"

namespace vend::bench {

namespace {

using namespace std::chrono_literals;

std::atomic<bool> g_stop{false};

void on_term(int) { g_stop = true; }

std::string self_exe() { return std::filesystem::read_symlink("/proc/self/exe").string(); }

void write_status(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path + ".tmp", std::ios::trunc);
    out << text << "\n";
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

}  // namespace

int run_fleet_host(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: --fleet-host PREFIX FIRST COUNT BROKER LEDGER_DIR STATUS\n");
    return 2;
  }
  ::signal(SIGTERM, on_term);
  ::signal(SIGINT, on_term);
  ScaleFleetSpec spec;
  spec.prefix = argv[2];
  spec.first = std::atoi(argv[3]);
  spec.machines = std::atoi(argv[4]);
  spec.broker_url = argv[5];
  spec.ledger_dir = argv[6];
  const std::string status = argv[7];
  StderrLogger log(LogLevel::kError);
  ScaleFleet fleet(spec, log);
  if (Status s = fleet.start(); !s.ok()) {
    write_status(status, "error: " + s.error().to_string());
    return 1;
  }
  while (!g_stop) {
    write_status(status,
                 std::to_string(fleet.online()) + " " + std::to_string(fleet.unacked_events()));
    std::this_thread::sleep_for(500ms);
  }
  // The machines vanish as in a power cut (the broker publishes their
  // wills): a clean stop of thousands takes minutes and measures nothing.
  std::_Exit(0);
}

Result<std::unique_ptr<FleetHosts>> FleetHosts::start(const ScaleFleetSpec& spec, int per_host,
                                                      int timeout_s) {
  std::unique_ptr<FleetHosts> h(new FleetHosts());
  for (int first = 1; first <= spec.machines; first += per_host) {
    int count = std::min(per_host, spec.machines - first + 1);
    std::string n = std::to_string(h->hosts_.size());
    h->status_files_.push_back(h->dir_.file("host-" + n + ".status"));
    std::vector<std::string> argv = {self_exe(),
                                     "--fleet-host",
                                     spec.prefix,
                                     std::to_string(first),
                                     std::to_string(count),
                                     spec.broker_url,
                                     spec.ledger_dir,
                                     h->status_files_.back()};
    h->hosts_.push_back(std::make_unique<test::Child>(argv, h->dir_.file("host-" + n + ".log")));
  }
  for (int i = 1; i <= spec.machines; ++i) h->ids_.push_back(scale_machine_id(spec.prefix, i));
  auto deadline = SteadyClock::now() + std::chrono::seconds(timeout_s);
  for (;;) {
    auto s = h->statuses();
    if (!s.ok()) return s.error();
    if (s->size() == h->hosts_.size()) return h;
    if (SteadyClock::now() > deadline) {
      return make_error("bench_setup", "the machine hosts did not start within " +
                                           std::to_string(timeout_s) + " s");
    }
    std::this_thread::sleep_for(200ms);
  }
}

FleetHosts::~FleetHosts() {
  for (auto& h : hosts_) {
    if (h->running()) h->signal(SIGTERM);
  }
  for (auto& h : hosts_) {
    if (h->wait(120s) < 0) h->kill_now();
  }
}

// Only the hosts that have written a status; an error for a failed or dead one.
Result<std::vector<std::pair<int, int64_t>>> FleetHosts::statuses() const {
  std::vector<std::pair<int, int64_t>> out;
  for (size_t i = 0; i < hosts_.size(); ++i) {
    std::string text = test::read_file(status_files_[i]);
    if (text.rfind("error:", 0) == 0) return make_error("bench_setup", "machine host: " + text);
    if (!hosts_[i]->running()) {
      return make_error("bench_setup",
                        "machine host " + std::to_string(i) + " died: " +
                            test::read_file(dir_.file("host-" + std::to_string(i) + ".log")));
    }
    int online = 0;
    long long unacked = 0;
    if (std::sscanf(text.c_str(), "%d %lld", &online, &unacked) == 2) {
      out.emplace_back(online, unacked);
    }
  }
  return out;
}

int FleetHosts::online() const {
  auto s = statuses();
  if (!s.ok()) throw std::runtime_error(s.error().to_string());
  int n = 0;
  for (const auto& [online, unacked] : *s) n += online;
  return n;
}

int64_t FleetHosts::unacked_events() const {
  auto s = statuses();
  if (!s.ok()) throw std::runtime_error(s.error().to_string());
  int64_t n = 0;
  for (const auto& [online, unacked] : *s) n += unacked;
  return n;
}

}  // namespace vend::bench
