// bench_firmware: the device side.
//
// 1. Dispense commit time: one dispense as the device core writes it =
//    Ledger::accept_dispense (consume the token, record ACCEPTED) +
//    mark_motor_running (before the motor moves) + finish_dispense(DISPENSED)
//    (the result and its signed outbox event): three SQLite transactions, WAL, with
//    synchronous=FULL (the firmware's default: fsync per commit) against the
//    same transactions with synchronous=NORMAL (no fsync at commit) in the
//    same run, so the fsync cost shows as a plain ratio FULL / NORMAL.
//    Median and p99 per dispense. The ledger lives in $TMPDIR; its file
//    system is noted (tmpfs would make fsync free).
// 2. Idle RSS of the real vend-firmware daemon: a mosquitto started here, a
//    temp config, wait until its retained status says online, let it idle
//    2 s, read VmRSS. Skipped under --emulated (the RSS would be qemu's).
//    Twice: over plain tcp:// to a bare mosquitto (daemon_idle_rss), and as
//    a device is configured, over TLS with a password to the shipped broker
//    configuration (daemon_idle_rss_tls; tests/support/broker_rig.hpp).
#include <signal.h>
#include <stdlib.h>
#include <sys/vfs.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.hpp"
#include "broker_rig.hpp"
#include "test_support.hpp"
#include "vend/crypto.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/log.hpp"
#include "vend/paho_transport.hpp"
#include "vend/protocol.hpp"
#include "vend/random.hpp"
#include "vend/topics.hpp"

namespace {

using namespace std::chrono_literals;
using vend::bench::Better;
using vend::fw::Ledger;

constexpr const char* kDevice = "vm-bench-1";
constexpr int kSlot = 1;
constexpr int kCapacity = 1000;  // the config's maximum

template <typename R>
void check(const R& r, const std::string& what) {
  if (!r.ok()) throw std::runtime_error(what + ": " + r.error().to_string());
}

// Per-dispense commit times of one run, in ms.
struct Samples {
  std::vector<double> ms;
};

class LedgerRig {
 public:
  LedgerRig(const std::string& path, vend::sql::Sync sync) : random_(7) {
    vend::fw::Identity id{kDevice, vend::crypto::Key::generate(), "boot-bench"};
    auto ledger = Ledger::open(path, std::move(id), sync);
    check(ledger, "open " + path);
    ledger_.emplace(std::move(*ledger));
    check(ledger_->sync_slots({vend::fw::SlotConfig{kSlot, kCapacity, "cola", -1}}), "slots");
  }

  // Restocks `n` items, then dispenses them one by one, timing each.
  Samples dispense(int n, int run) {
    std::string restock = "rs-" + std::to_string(run);
    check(ledger_->confirm_restock(restock, kSlot, n, 0, random_), "restock");
    auto tokens = ledger_->available_tokens(kSlot);
    check(tokens, "tokens");
    Samples s;
    int i = 0;
    for (const std::string& token : *tokens) {
      std::string order = "o-" + std::to_string(run) + "-" + std::to_string(i++);
      vend::proto::DispenseCommand cmd{kDevice, order, kSlot, token, int64_t{1} << 50};
      vend::bench::Stopwatch sw;
      check(ledger_->accept_dispense(cmd, 1), "accept");
      check(ledger_->mark_motor_running(order, 1), "motor");
      check(ledger_->finish_dispense(order, vend::fw::DispenseState::kDispensed, "", 2), "finish");
      s.ms.push_back(static_cast<double>(sw.elapsed_ns()) * 1e-6);
    }
    // The cloud acknowledges, as it would: the outbox does not grow.
    auto last = ledger_->last_seq();
    check(last, "last_seq");
    check(ledger_->acknowledge(*last), "ack");
    return s;
  }

 private:
  vend::SeededRandom random_;
  std::optional<Ledger> ledger_;
};

std::string fs_type(const std::string& path) {
  struct statfs st {};
  if (statfs(path.c_str(), &st) != 0) return "unknown";
  switch (static_cast<unsigned long>(st.f_type)) {
    case 0xEF53: return "ext4";
    case 0x01021994: return "tmpfs (fsync is free: FULL ~ NORMAL)";
    case 0x9123683E: return "btrfs";
    case 0x58465342: return "xfs";
    case 0x794c7630: return "overlayfs";
    default: return "f_type " + std::to_string(st.f_type);
  }
}

void measure_commits(vend::bench::Report& report, const vend::bench::Options& opt) {
  const int n = static_cast<int>(std::min<int64_t>(vend::bench::scaled(opt, 300, 20), kCapacity));
  vend::test::TempDir dir;
  LedgerRig full(dir.file("full.db"), vend::sql::Sync::kFull);
  LedgerRig normal(dir.file("normal.db"), vend::sql::Sync::kNormal);
  std::vector<double> full_med, full_p99, normal_med, normal_p99;
  for (int r = 0; r < opt.runs; ++r) {  // interleaved: both see the same noise
    Samples f = full.dispense(n, r);
    Samples m = normal.dispense(n, r);
    full_med.push_back(vend::bench::median(f.ms));
    full_p99.push_back(vend::bench::percentile(f.ms, 99));
    normal_med.push_back(vend::bench::median(m.ms));
    normal_p99.push_back(vend::bench::percentile(m.ms, 99));
    vend::bench::progress("bench_firmware", "run " + std::to_string(r + 1) + ": FULL median " +
                                                std::to_string(full_med.back()) + " ms, NORMAL " +
                                                std::to_string(normal_med.back()) + " ms");
  }
  report.add("dispense_commit_full_median", "ms", full_med, Better::kLower);
  report.add("dispense_commit_full_p99", "ms", full_p99, Better::kLower);
  report.add("dispense_commit_normal_median", "ms", normal_med, Better::kLower);
  report.add("dispense_commit_normal_p99", "ms", normal_p99, Better::kLower);
  report.compare("dispense_commit_full_median", "dispense_commit_normal_median",
                 vend::bench::RatioKind::kPlain);
  report.compare("dispense_commit_full_p99", "dispense_commit_normal_p99",
                 vend::bench::RatioKind::kPlain);
  report.note(
      "dispense commit: accept_dispense + mark_motor_running + "
      "finish_dispense(DISPENSED), 3 transactions, " +
      std::to_string(n) + " dispenses per run; ratio = FULL / NORMAL (fsync cost); " +
      "ledger on " + fs_type(dir.path()));
}

// Waits for the daemon's retained presence status to say online.
class PresenceWatch {
 public:
  explicit PresenceWatch(vend::PahoOptions options) : transport_(std::move(options), log_) {
    transport_.on_message([this](const vend::Message& m) {
      auto s = vend::proto::decode_status(m.payload);
      std::lock_guard lock(mu_);
      if (s.ok() && s->message.online) online_ = true;
      cv_.notify_all();
    });
    check(transport_.connect(), "watch connect");
    check(transport_.subscribe(vend::topics::device_status(kDevice), 1), "watch subscribe");
  }
  bool wait_online(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return online_; });
  }

 private:
  vend::NullLogger log_;
  vend::PahoTransport transport_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool online_ = false;
};

// How the daemon reaches its broker: the config's broker keys, the secret
// files they name, and the options of a client that may read its status.
struct BrokerAccess {
  nlohmann::json config;
  std::vector<std::pair<std::string, std::string>> private_files;  // name, content
  vend::PahoOptions watch;
};

BrokerAccess plain_access(const vend::test::MosquittoServer& broker) {
  BrokerAccess a;
  a.config = {{"broker_url", broker.url()}};
  a.watch.server_uri = broker.url();
  a.watch.client_id = "bench-presence-watch";
  a.watch.clean_session = true;
  return a;
}

BrokerAccess tls_access(const vend::test::SecureBroker& broker) {
  BrokerAccess a;
  a.config = {{"broker_url", broker.tls_url()},
              {"tls_ca_file", broker.ca_file()},
              {"username", kDevice},
              {"password_file", "mqtt.password"}};
  a.private_files = {{"mqtt.password", broker.password(kDevice) + "\n"}};
  a.watch =
      vend::test::client_options(broker, broker.plain_url(), "vend-agent", "bench-presence-watch");
  return a;
}

// One daemon start: online, idle 2 s, VmRSS in KiB.
double daemon_idle_rss_kib(const BrokerAccess& access) {
  vend::test::TempDir dir;
  vend::test::write_private_file(dir.file("device.key"),
                                 vend::crypto::Key::generate().to_hex() + "\n");
  for (const auto& [name, content] : access.private_files) {
    vend::test::write_private_file(dir.file(name), content);
  }
  nlohmann::json config = {
      {"device_id", kDevice},
      {"key_file", "device.key"},
      {"ledger_path", "ledger.db"},
      {"slots", nlohmann::json::array({{{"slot", 1}, {"capacity", 10}, {"product", "cola"}},
                                       {{"slot", 2}, {"capacity", 10}}})}};
  config.update(access.config);
  vend::test::write_file(dir.file("device.json"), config.dump(2));
  PresenceWatch watch(access.watch);
  std::string exe = vend::bench::project_binary("firmware/vend-firmware");
  vend::test::Child daemon({exe, "--config", dir.file("device.json"), "--log-level", "warn"},
                           dir.file("daemon.log"));
  if (!watch.wait_online(15s)) {
    throw std::runtime_error("vend-firmware did not come online within 15 s: " +
                             vend::test::read_file(dir.file("daemon.log")));
  }
  std::this_thread::sleep_for(2s);
  auto rss = vend::bench::rss_kib(daemon.pid());
  if (!rss) throw std::runtime_error("cannot read VmRSS of the daemon");
  daemon.signal(SIGTERM);
  daemon.wait(5s);
  return static_cast<double>(*rss);
}

std::vector<double> idle_rss_mib(const vend::bench::Options& opt, const BrokerAccess& access) {
  return vend::bench::repeat(opt.runs, [&] { return daemon_idle_rss_kib(access) / 1024.0; });
}

void measure_rss(vend::bench::Report& report, const vend::bench::Options& opt) {
  if (!opt.emulated.empty()) {
    report.note("daemon idle RSS not measured under " + opt.emulated +
                ": it would be the emulator's (translator + guest), not the daemon's");
    return;
  }
  {
    vend::test::MosquittoServer broker;
    report.add("daemon_idle_rss", "MiB", idle_rss_mib(opt, plain_access(broker)), Better::kLower);
  }
  // The shipped broker configuration reads deploy/mosquitto/ from the sources.
  setenv("VEND_SOURCE_DIR", VEND_BENCH_SOURCE_DIR, /*overwrite=*/0);
  vend::test::SecureBroker broker({std::string("device:") + kDevice, "agent"});
  report.add("daemon_idle_rss_tls", "MiB", idle_rss_mib(opt, tls_access(broker)), Better::kLower);
  report.note(
      "idle RSS: vend-firmware daemon (sim HAL, 2 slots) online to a local mosquitto, "
      "then 2 s idle; VmRSS from /proc/<pid>/status. daemon_idle_rss: tcp://, no "
      "credentials; daemon_idle_rss_tls: ssl:// with a password, to the shipped broker "
      "configuration (deploy/mosquitto), as a device is configured");
}

}  // namespace

int main(int argc, char** argv) {
  return vend::bench::run_bench(argc, argv, "bench_firmware",
                                [](const vend::bench::Options& opt, vend::bench::Report& report) {
                                  measure_commits(report, opt);
                                  measure_rss(report, opt);
                                });
}
