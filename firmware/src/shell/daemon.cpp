#include "shell/daemon.hpp"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "shell/machine_hal.hpp"
#include "shell/setup.hpp"
#include "update_shell/update_shell.hpp"
#include "vend/connect_retry.hpp"
#include "vend/fw/device_core.hpp"
#include "vend/inbox.hpp"
#include "vend/paho_transport.hpp"
#include "vend/topics.hpp"

namespace vend::fw {

namespace {

using Steady = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr const char* kLog = "daemon";
constexpr milliseconds kTickInterval{20};
// Commands waiting for the core: beyond these a command is dropped and
// counted (the cloud re-sends it; a dispense is deduplicated by order id).
constexpr Inbox<std::string>::Limits kInboundLimits{1024, 16 * 1024 * 1024, 0};

// Signals are the one process-wide input: the handler only counts them.
std::atomic<int> g_signals{0};

extern "C" void on_stop_signal(int) { g_signals.fetch_add(1); }

void install_signal_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

PahoOptions transport_options(const DeviceConfig& c, const Identity& identity, int64_t now_ms) {
  PahoOptions o;
  o.server_uri = c.broker_url;
  o.client_id = c.device_id;
  if (!c.username.empty()) o.username = c.username;
  if (!c.username.empty()) o.password = c.password;
  if (c.broker_url.rfind("ssl://", 0) == 0) {  // config: ssl:// always names its CA
    o.tls = PahoTlsOptions{c.tls_ca_file, c.tls_cert_file, c.tls_key_file};
  }
  Message offline = DeviceCore::presence(identity, false, now_ms);
  o.will = Will{offline.topic, offline.payload, offline.qos, offline.retained};
  o.clean_session = false;  // commands sent while we were away are kept for us
  // Room for a window of events, their retransmissions and presence.
  o.max_inflight = std::max(1000, 2 * c.core.outbox_window + 16);
  return o;
}

class Daemon {
 public:
  Daemon(DeviceSetup setup, Logger& log) : setup_(std::move(setup)), log_(log) {}
  int run();

 private:
  Status start();
  Status start_updates();
  void serve();
  void finish_rotation();
  void deliver(Inbox<std::string>::Batch& batch, bool accept_commands);
  void tick();
  void publish_offline();

  DeviceSetup setup_;
  Logger& log_;
  SystemClock clock_;
  SecureRandom random_;
  std::optional<Ledger> ledger_;
  std::unique_ptr<MachineHal> hal_;
  Inbox<std::string> inbound_{kInboundLimits};
  std::unique_ptr<PahoTransport> transport_;  // after inbound_: its handlers push there
  std::unique_ptr<DeviceCore> core_;
  std::unique_ptr<UpdateShell> update_;  // when device.json has an `update` section
  bool hal_ok_ = true;                   // the last HAL check: the update's self-test
  std::unique_ptr<ConnectRetry> connector_;
  uint64_t ignored_while_stopping_ = 0;
  std::optional<Error> hardware_lost_;  // the motors can no longer be driven
};

Status Daemon::start() {
  const DeviceConfig& c = setup_.config;
  Identity identity{c.device_id, setup_.key, random_.id128()};
  auto ledger = Ledger::open(c.ledger_path, identity, sync_mode(c));
  if (!ledger.ok()) return ledger.error();
  ledger_.emplace(std::move(ledger).value());
  if (auto s = ledger_->sync_slots(c.slots); !s.ok()) {
    // A full disk is a fault to report, not a reason to exit (and be
    // restarted forever): the slots already in the ledger serve.
    if (s.error().code != "sqlite_full") return s;
    log_.error(kLog,
               "ledger storage is full: slot settings not updated (" + s.error().message + ")");
  }
  auto hal = MachineHal::create(c, *ledger_, clock_, random_.next_u64(), log_);
  if (!hal.ok()) return hal.error();
  hal_ = std::move(hal).value();

  transport_ =
      std::make_unique<PahoTransport>(transport_options(c, identity, clock_.wall_ms()), log_);
  std::string cmd_topic = topics::device_cmd(c.device_id);
  transport_->on_message([this, cmd_topic](const Message& m) {
    // A full queue drops and counts; the core thread reports the drops.
    if (m.topic == cmd_topic) inbound_.push_message(m.payload, m.payload.size());
  });
  transport_->on_connection([this](bool up) { inbound_.push_connection(up); });

  core_ = std::make_unique<DeviceCore>(*ledger_, hal_->hal(), *transport_, clock_, random_, log_,
                                       c.core);
  if (auto s = core_->boot(); !s.ok()) return s;
  if (auto s = start_updates(); !s.ok()) return s;
  log_.info(kLog, "device " + c.device_id + " booted (boot " + identity.boot_id + ", ledger " +
                      c.ledger_path + ", broker " + c.broker_url + ")");
  connector_ = std::make_unique<ConnectRetry>(*transport_, random_, log_, kLog, "working offline");
  return {};
}

// Updates over the air, when configured: the shell takes the update
// commands the core authenticated and reports through the core's outbox.
Status Daemon::start_updates() {
  const UpdateConfig& u = setup_.config.update;
  if (u.public_key_file.empty()) return {};
  auto shell = UpdateShell::create(u, VEND_VERSION, setup_.config.ledger_path, clock_, log_);
  if (!shell.ok()) return shell.error();
  update_ = std::move(shell).value();
  update_->set_reporter([this](const proto::EventBody& body) { return core_->report_event(body); });
  core_->set_update_handler(
      [this](const proto::UpdateCommand& command) { return update_->on_command(command); });
  log_.info(kLog, std::string("firmware ") + VEND_VERSION + "; updates from " + u.dir);
  return {};
}

void Daemon::deliver(Inbox<std::string>::Batch& batch, bool accept_commands) {
  for (bool up : batch.connection_changes) core_->on_connection(up);
  if (batch.dropped_since_last > 0) {
    log_.warn(kLog, "inbound queue full: dropped " + std::to_string(batch.dropped_since_last) +
                        " commands (the cloud re-sends them)");
  }
  for (const auto& item : batch.items) {
    const std::string& payload = std::get<0>(item);  // the daemon pushes no calls
    if (!accept_commands) {
      ++ignored_while_stopping_;
      continue;
    }
    CommandOutcome o = core_->on_command(payload);
    log_.debug(kLog, "command " + (o.type.empty() ? std::string("?") : o.type) + ": " + o.result +
                         (o.reason.empty() ? "" : " (" + o.reason + ")"));
  }
}

void Daemon::tick() {
  core_->tick();
  hal_->between_ticks(*ledger_, core_->idle());
  if (update_) {
    // Idle: no dispense queued or running, and no outcome waiting in memory
    // for room in the ledger (every piece of work committed).
    update_->tick(core_->idle() && !core_->storage_full(), transport_->connected(), hal_ok_);
  }
}

void Daemon::serve() {
  Steady::time_point next_tick = Steady::now();
  while (g_signals.load() == 0) {
    Inbox<std::string>::Batch batch = inbound_.take_until(next_tick);
    deliver(batch, /*accept_commands=*/true);
    Steady::time_point now = Steady::now();
    if (now < next_tick) continue;
    tick();
    const Status s = hal_->check();
    hal_ok_ = s.ok();
    if (!s.ok()) {
      // Without its guard no motor can run: exit, and systemd restarts both.
      log_.error(kLog, "stopping: " + s.error().to_string());
      hardware_lost_ = s.error();
      return;
    }
    // Late ticks are not caught up in a burst: the next one is a period away.
    next_tick = std::max(next_tick + kTickInterval, now);
  }
}

// After a stop signal: no new commands; the rotation under way (and dispenses
// already accepted) finish, bounded by the motor timeout.
void Daemon::finish_rotation() {
  int64_t budget_ms = setup_.config.core.motor_timeout_ms;
  Steady::time_point deadline = Steady::now() + milliseconds(budget_ms);
  if (!core_->idle()) log_.info(kLog, "stopping: letting the running dispense finish");
  while (!core_->idle() && g_signals.load() < 2 && Steady::now() < deadline) {
    Inbox<std::string>::Batch batch = inbound_.take_until(Steady::now() + kTickInterval);
    deliver(batch, /*accept_commands=*/false);
    tick();
  }
  if (!core_->idle()) log_.warn(kLog, "stopping with a dispense unfinished: it will be UNCERTAIN");
  if (ignored_while_stopping_ > 0) {
    log_.info(kLog, std::to_string(ignored_while_stopping_) +
                        " commands ignored while stopping (the cloud re-sends them)");
  }
}

void Daemon::publish_offline() {
  if (!transport_->connected()) return;
  Message offline = DeviceCore::presence(core_->identity(), false, clock_.wall_ms());
  if (auto s = transport_->publish(offline); !s.ok()) {
    log_.warn(kLog, "offline status not published: " + s.error().to_string());
  }
}

int Daemon::run() {
  if (auto s = start(); !s.ok()) {
    log_.error(kLog, s.error().to_string());
    return exit_code_for(s.error());
  }
  serve();
  log_.info(kLog, "stop requested");
  finish_rotation();
  connector_->stop();
  publish_offline();
  transport_->disconnect();  // waits briefly for in-flight publishes
  const CoreStats& st = core_->stats();
  log_.info(kLog, "stopped: " + std::to_string(st.dispensed) + " dispensed, " +
                      std::to_string(st.failed) + " failed, " + std::to_string(st.rejected) +
                      " rejected, " + std::to_string(st.refused) + " refused, " +
                      std::to_string(inbound_.dropped_total()) + " dropped this run");
  return hardware_lost_ ? exit_code_for(*hardware_lost_) : kExitOk;
}

}  // namespace

int run_daemon(const DaemonArgs& args) {
  StderrLogger log(args.log_level);
  install_signal_handlers();
  auto setup = load_setup(args.config_path, /*with_key=*/true);
  if (!setup.ok()) {
    log.error(kLog, setup.error().to_string());
    return exit_code_for(setup.error());
  }
  Daemon daemon(std::move(setup).value(), log);
  return daemon.run();
}

}  // namespace vend::fw
