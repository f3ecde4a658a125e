// `vendctl watch`: a Paho subscription to vend/v1/ops/# folded into a
// FleetView, redrawn at most kFramesPerSecond times a second.
//
// Threads: Paho's receive thread applies messages to the view under `mu`
// (FleetView::apply is cheap: one decode); the main thread renders under the
// same lock and writes outside it.
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "commands.hpp"
#include "vend/clock.hpp"
#include "vend/ctl/fleet_view.hpp"
#include "vend/ctl/render.hpp"
#include "vend/log.hpp"
#include "vend/paho_transport.hpp"
#include "vend/random.hpp"
#include "vend/topics.hpp"

namespace vend::ctl {

namespace {

constexpr std::chrono::milliseconds kFramePeriod{250};  // at most 4 frames/s
constexpr int64_t kRedrawMs = 1000;                     // ages change even when nothing arrives

volatile sig_atomic_t g_stop = 0;  // set by SIGINT/SIGTERM
void on_stop_signal(int) { g_stop = 1; }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// Device rows that fit a terminal under the other sections.
size_t device_rows_for_terminal() {
  winsize ws{};
  if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) != 0 || ws.ws_row == 0) return 0;
  return ws.ws_row > 34 ? ws.ws_row - 30 : 4;
}

bool is_tls(const std::string& url) {
  return url.rfind("ssl://", 0) == 0 || url.rfind("mqtts://", 0) == 0;
}

Result<PahoOptions> paho_options(const CtlOptions& o) {
  PahoOptions p;
  p.server_uri = o.mqtt_url;
  p.client_id = "vendctl-" + std::to_string(getpid()) + "-" + SecureRandom().id128().substr(0, 8);
  p.clean_session = true;  // a viewer: nothing to keep while away
  p.username = o.username;
  if (o.password_file) {
    auto password = read_secret_file(*o.password_file);
    if (!password.ok()) return password.error();
    p.password = *password;
  }
  if (is_tls(o.mqtt_url)) p.tls = PahoTlsOptions{o.ca_file, "", ""};
  p.reconnect_max = std::chrono::milliseconds(5000);
  return p;
}

struct Shared {
  std::mutex mu;
  FleetView view;
  bool dirty = true;
  bool connected = true;
};

// Renders the current view (under the lock) with a note on the connection.
std::string frame(Shared& s, const FrameOptions& base) {
  std::lock_guard lock(s.mu);
  FrameOptions options = base;
  if (!s.connected) options.note = "broker connection lost; reconnecting...";
  s.dirty = false;
  return render_frame(s.view, SystemClock().wall_ms(), options);
}

// Redraws until --for ends or a signal arrives.
void watch_loop(Shared& shared, const CtlOptions& o, bool tty, std::ostream& out) {
  SystemClock clock;
  const int64_t start = clock.monotonic_ms();
  int64_t last_frame = -kRedrawMs;
  FrameOptions options{tty, tty ? device_rows_for_terminal() : 0, ""};
  while (g_stop == 0 && (!o.for_ms || clock.monotonic_ms() - start < *o.for_ms)) {
    bool dirty = false;
    {
      std::lock_guard lock(shared.mu);
      dirty = shared.dirty;
    }
    const int64_t now = clock.monotonic_ms();
    if (dirty || (tty && now - last_frame >= kRedrawMs)) {
      out << frame(shared, options) << std::flush;
      if (!tty) out << "\n";
      last_frame = now;
    }
    std::this_thread::sleep_for(kFramePeriod);
  }
}

}  // namespace

int run_watch(const CtlOptions& o, std::ostream& out, std::ostream& err) {
  auto options = paho_options(o);
  if (!options.ok()) return report_error(options.error(), err);
  StderrLogger log(LogLevel::kError);
  Shared shared;
  PahoTransport mqtt(*options, log);
  mqtt.on_message([&](const Message& m) {
    std::lock_guard lock(shared.mu);
    (void)shared.view.apply(m.topic, m.payload);  // kept in the view for the footer
    shared.dirty = true;
  });
  mqtt.on_connection([&](bool up) {
    std::lock_guard lock(shared.mu);
    shared.connected = up;
    shared.dirty = true;
  });
  if (auto s = mqtt.connect(); !s.ok()) {
    return report_error(make_error("unreachable", "cannot connect to MQTT broker " + o.mqtt_url +
                                                      ": " + s.error().message),
                        err);
  }
  if (auto s = mqtt.subscribe(topics::ops_all(), 1); !s.ok()) {
    return report_error(
        make_error("unreachable", "cannot subscribe to " + topics::ops_all() + " on " + o.mqtt_url +
                                      ": " + s.error().message),
        err);
  }
  err << "vendctl: watching " << topics::ops_all() << " on " << o.mqtt_url << "\n" << std::flush;
  install_stop_handlers();
  if (o.once) {
    const auto collect = std::chrono::milliseconds(o.for_ms.value_or(kOnceCollectMs));
    const auto until = std::chrono::steady_clock::now() + collect;
    while (g_stop == 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    out << frame(shared, FrameOptions{}) << std::flush;
  } else {
    watch_loop(shared, o, isatty(STDOUT_FILENO) == 1, out);
  }
  mqtt.disconnect();
  return kExitOk;
}

}  // namespace vend::ctl
