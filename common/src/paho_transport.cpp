#include "vend/paho_transport.hpp"

#include <MQTTAsync.h>
#include <mqtt/async_client.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "vend/in_memory_bus.hpp"

namespace vend {

namespace {

using namespace std::chrono_literals;

constexpr std::string_view kLog = "mqtt";

// Paho C, under Paho MQTT C++, initializes all of OpenSSL (error strings,
// every algorithm) for its first client unless told not to, about 1.5 MB
// resident even for a tcp:// client. It is told not to (Paho MQTT C++ has no
// call for it, so through Paho C's); a TLS client initializes libssl itself.
// Once per process each.
void init_libraries(bool tls) {
  static std::once_flag paho;
  std::call_once(paho, [] {
    MQTTAsync_init_options init = MQTTAsync_init_options_initializer;
    init.do_openssl_init = 0;
    MQTTAsync_global_init(&init);
    // Paho C records every function entry and exit in a 400-entry trace ring
    // (122 KiB of heap, written all over, under a mutex) that nothing reads
    // unless MQTT_C_CLIENT_TRACE sends it somewhere. ERROR keeps only errors
    // in it; an operator who sets MQTT_C_CLIENT_TRACE gets Paho's tracing.
    if (std::getenv("MQTT_C_CLIENT_TRACE") == nullptr) {
      MQTTAsync_setTraceLevel(MQTTASYNC_TRACE_ERROR);
    }
  });
  if (!tls) return;
  static std::once_flag ssl;
  std::call_once(ssl, [] {
    OPENSSL_init_ssl(OPENSSL_INIT_LOAD_SSL_STRINGS | OPENSSL_INIT_LOAD_CRYPTO_STRINGS, nullptr);
  });
}

bool is_tls_uri(const std::string& uri) {
  return uri.rfind("ssl://", 0) == 0 || uri.rfind("mqtts://", 0) == 0 ||
         uri.rfind("wss://", 0) == 0;
}

// True while this thread runs a user handler: subscribe() must then not wait
// for its SUBACK (the Paho thread that would read it may be waiting for us).
thread_local bool t_in_handler = false;

class HandlerScope {
 public:
  HandlerScope() : previous_(t_in_handler) { t_in_handler = true; }
  ~HandlerScope() { t_in_handler = previous_; }
  HandlerScope(const HandlerScope&) = delete;
  HandlerScope& operator=(const HandlerScope&) = delete;

 private:
  bool previous_;
};

struct HostPort {
  std::string host;
  int port = 0;
};

int default_port(std::string_view scheme) {
  if (scheme == "ssl" || scheme == "mqtts") return 8883;
  if (scheme == "ws") return 80;
  if (scheme == "wss") return 443;
  return 1883;
}

// "scheme://host[:port][/path]", host possibly "[v6]".
std::optional<HostPort> parse_server_uri(std::string_view uri) {
  size_t scheme_end = uri.find("://");
  std::string_view scheme =
      scheme_end == std::string_view::npos ? "tcp" : uri.substr(0, scheme_end);
  std::string_view rest = scheme_end == std::string_view::npos ? uri : uri.substr(scheme_end + 3);
  rest = rest.substr(0, rest.find('/'));
  HostPort out{"", default_port(scheme)};
  std::string_view port_text;
  if (!rest.empty() && rest.front() == '[') {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    out.host = std::string(rest.substr(1, close - 1));
    if (close + 1 < rest.size() && rest[close + 1] == ':') port_text = rest.substr(close + 2);
  } else {
    size_t colon = rest.rfind(':');
    out.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port_text = rest.substr(colon + 1);
  }
  if (!port_text.empty()) {
    auto [ptr, ec] =
        std::from_chars(port_text.data(), port_text.data() + port_text.size(), out.port);
    if (ec != std::errc() || ptr != port_text.data() + port_text.size()) return std::nullopt;
  }
  if (out.host.empty() || out.port <= 0 || out.port > 65535) return std::nullopt;
  return out;
}

// A Paho MQTT C++ exception as an error value: "not_connected",
// "queue_full" or "mqtt_error".
Error paho_error(const std::string& what, const mqtt::exception& e) {
  int rc = e.get_return_code();
  std::string text = what + ": " + e.what();
  if (rc == MQTTASYNC_DISCONNECTED) return make_error("not_connected", text);
  if (rc == MQTTASYNC_MAX_MESSAGES_INFLIGHT || rc == MQTTASYNC_MAX_BUFFERED_MESSAGES) {
    return make_error("queue_full", text);
  }
  return make_error("mqtt_error", text);
}

// Runs `call` (which calls Paho MQTT C++); whatever it throws comes back as
// an error value. No exception of the library leaves the adapter.
template <class Call>
Status guarded(const std::string& what, Call&& call) {
  try {
    call();
    return {};
  } catch (const mqtt::exception& e) {
    return paho_error(what, e);
  } catch (const std::exception& e) {
    return make_error("mqtt_error", what + ": " + e.what());
  }
}

// Waits up to `timeout` for `token`: "timeout" when it did not complete, the
// request's failure as a value when it failed.
Status wait_token(mqtt::token& token, std::chrono::milliseconds timeout, const std::string& what) {
  bool done = false;
  Status status = guarded(what, [&] { done = token.wait_for(timeout); });
  if (status && !done) return make_error("timeout", what + " timed out");
  return status;
}

// Runs code called from a Paho thread: nothing it throws may unwind into
// Paho C, so everything is caught here and logged.
template <class Body>
void on_paho_thread(Logger& log, std::string_view what, Body&& body) noexcept {
  try {
    body();
  } catch (const std::exception& e) {
    log.error(kLog, std::string(what) + " threw: " + e.what());
  } catch (...) {
    log.error(kLog, std::string(what) + " threw");
  }
}

mqtt::connect_options make_connect_options(const PahoOptions& options) {
  mqtt::connect_options opts;
  opts.set_mqtt_version(MQTTVERSION_3_1_1);
  opts.set_clean_session(options.clean_session);
  opts.set_keep_alive_interval(options.keep_alive_s);
  auto timeout_s = std::chrono::ceil<std::chrono::seconds>(options.connect_timeout).count();
  opts.set_connect_timeout(static_cast<int>(std::max<int64_t>(timeout_s, 1)));
  opts.set_max_inflight(options.max_inflight);
  opts.set_automatic_reconnect(false);  // our own loop: jitter + session checks
  if (options.username) opts.set_user_name(*options.username);
  if (options.password) opts.set_password(*options.password);
  if (options.will) {
    const Will& w = *options.will;
    opts.set_will(
        mqtt::will_options(w.topic, w.payload.data(), w.payload.size(), w.qos, w.retained));
  }
  if (options.tls) {
    mqtt::ssl_options ssl;
    ssl.set_trust_store(options.tls->ca_file);
    if (!options.tls->cert_file.empty()) ssl.set_key_store(options.tls->cert_file);
    if (!options.tls->key_file.empty()) ssl.set_private_key(options.tls->key_file);
    ssl.set_enable_server_cert_auth(true);
    opts.set_ssl(std::move(ssl));
  }
  return opts;
}

// Publishes sent but not yet completed (PUBACK for QoS 1, written for QoS 0).
// When the broker lost the session, Paho drops the pending publishes
// (MQTTAsync_cleanSession in Paho C 1.3.12 fails their tokens). Should a
// Paho version free them silently, their slots would leak and publish()
// would report queue_full forever, so the window is also reset then and
// completions tagged with an older generation are ignored. Thread-safe.
class InflightWindow {
 public:
  explicit InflightWindow(int capacity) : capacity_(capacity) {}

  // The generation to tag a new publish with, or nullopt when full.
  std::optional<uintptr_t> acquire() {
    std::lock_guard<std::mutex> lock(mu_);
    if (count_ >= capacity_) return std::nullopt;
    ++count_;
    return generation_;
  }
  // A publish tagged `generation` completed, failed, or was never sent.
  void release(uintptr_t generation) {
    std::lock_guard<std::mutex> lock(mu_);
    if (generation == generation_ && count_ > 0) --count_;
  }
  // A new broker session: nothing of the old one will complete. Returns how
  // many slots were still taken.
  int reset() {
    std::lock_guard<std::mutex> lock(mu_);
    ++generation_;
    return std::exchange(count_, 0);
  }
  int count() const {
    std::lock_guard<std::mutex> lock(mu_);
    return count_;
  }

 private:
  mutable std::mutex mu_;
  const int capacity_;
  int count_ = 0;
  uintptr_t generation_ = 0;
};

}  // namespace

std::chrono::milliseconds reconnect_delay(int attempt, std::chrono::milliseconds min,
                                          std::chrono::milliseconds max, double unit) {
  int64_t low = std::max<int64_t>(min.count(), 1);
  int64_t high = std::max<int64_t>(max.count(), low);
  int64_t base = low;
  for (int i = 0; i < attempt && base < high; ++i) base *= 2;
  base = std::min(base, high);
  unit = std::clamp(unit, 0.0, 1.0);
  int64_t half = base / 2;
  return std::chrono::milliseconds(half + std::llround(unit * static_cast<double>(base - half)));
}

// ---- Impl ------------------------------------------------------------------

struct PahoTransport::Impl {
  // kIdle: no session wanted. kDown: wanted, not up (connecting or waiting
  // to reconnect). kUp: session up and reported.
  enum class Phase { kIdle, kDown, kUp };
  struct Subscription {
    int qos = 1;
    bool confirmed = false;  // SUBACKed in the current broker session
  };

  // Completes every publish (Paho threads): frees its window slot, which the
  // token carries as its user context. One listener for all publishes, so
  // nothing is allocated per request beyond Paho's own token.
  class PublishListener final : public mqtt::iaction_listener {
   public:
    explicit PublishListener(Impl& impl) : impl_(impl) {}
    void on_success(const mqtt::token& token) override { release(token, true); }
    void on_failure(const mqtt::token& token) override { release(token, false); }

   private:
    void release(const mqtt::token& token, bool ok) noexcept {
      impl_.inflight.release(reinterpret_cast<uintptr_t>(token.get_user_context()));
      if (!ok) {
        on_paho_thread(impl_.log, "publish completion", [&] {
          impl_.log.debug(kLog, "publish failed, rc " + std::to_string(token.get_return_code()));
        });
      }
    }
    Impl& impl_;
  };

  // Completes every subscribe (Paho threads): marks its filter SUBACKed, so
  // a reconnect with session_present only re-sends the ones that never were.
  class SubscribeListener final : public mqtt::iaction_listener {
   public:
    explicit SubscribeListener(Impl& impl) : impl_(impl) {}
    void on_success(const mqtt::token& token) override {
      on_paho_thread(impl_.log, "subscribe completion", [&] {
        if (auto topics = token.get_topics()) {
          for (size_t i = 0; i < topics->size(); ++i) impl_.mark_confirmed((*topics)[i]);
        }
      });
    }
    void on_failure(const mqtt::token& token) override {
      on_paho_thread(impl_.log, "subscribe completion", [&] {
        impl_.log.warn(kLog, "subscribe failed, rc " + std::to_string(token.get_return_code()));
      });
    }

   private:
    Impl& impl_;
  };

  Impl(Options opts, Logger& logger);
  ~Impl();

  void create_client();
  Status connect();
  void disconnect();
  Status publish(const Message& message);
  Status subscribe(const std::string& filter, int qos);
  Status subscribe_many(const std::vector<std::string>& filters, int qos);
  Status unsubscribe(const std::string& filter);

  Result<bool> attempt_connect();
  bool session_up(bool session_present, uint64_t losses_before);
  void restore_subscriptions(bool session_present);
  Status send_subscribe(const std::string& filter, int qos, bool wait);
  Result<mqtt::token_ptr> send_subscribe_packet(const std::vector<std::string>& filters, int qos);
  void mark_confirmed(const std::string& filter);
  bool mark_up(uint64_t losses_before);
  void reconnect_loop();
  void reconnect_once(std::unique_lock<std::mutex>& lock);

  // Paho threads.
  void handle_message(const mqtt::const_message_ptr& message);
  void handle_connected();
  void handle_connection_lost(const std::string& cause);
  void report_connection(bool up_now);

  const Options options;
  Logger& log;
  const std::optional<HostPort> broker;
  const mqtt::connect_options connect_options;
  std::optional<Error> create_error;  // set when the Paho client could not be made
  InflightWindow inflight;
  PublishListener publish_listener{*this};
  SubscribeListener subscribe_listener{*this};
  std::atomic<bool> up{false};

  // No lock of ours is ever held while calling Paho from a non-Paho thread
  // or while running a user handler: Paho's receive thread holds its own
  // mutex while it runs callbacks, so such a lock could deadlock against it.
  std::mutex connect_mu;  // serializes connect() / disconnect(); never taken by callbacks

  mutable std::mutex mu;  // guards the members below
  std::condition_variable cv;
  Phase phase = Phase::kIdle;
  bool attempting = false;   // a connect attempt, session setup and its report are running
  bool report_down = false;  // a lost session waits to be reported by the reconnect thread
  bool stopping = false;     // the reconnect thread must exit
  int attempt = 0;           // failed reconnects since the last success
  uint64_t losses = 0;       // connection-lost callbacks so far
  std::map<std::string, Subscription> subscriptions;
  MessageHandler message_handler;
  ConnectionHandler connection_handler;
  std::mt19937_64 jitter;  // reconnect thread only

  std::unique_ptr<mqtt::async_client> client;  // reset first (~Impl)
  std::thread reconnect_thread;
};

PahoTransport::Impl::Impl(Options opts, Logger& logger)
    : options(std::move(opts)),
      log(logger),
      broker(parse_server_uri(options.server_uri)),
      connect_options(make_connect_options(options)),
      inflight(options.max_inflight),
      jitter(std::random_device{}() ^ std::hash<std::string>{}(options.client_id)) {
  create_client();
  reconnect_thread = std::thread([this] { reconnect_loop(); });
}

void PahoTransport::Impl::create_client() {
  const std::string& uri = options.server_uri;
  init_libraries(options.tls.has_value() || is_tls_uri(uri));
  // No persistence: unacknowledged device events live in the firmware
  // outbox, not in Paho files in the working directory.
  Status created = guarded("create client for " + uri, [&] {
    // Paho queues publishes its send thread has not written yet, and by
    // default refuses the 101st (MQTT error -12) however much room the
    // in-flight window has: a burst (an agent that gained thousands of
    // machines) would lose commands. The window is the one bound.
    mqtt::create_options create(MQTTVERSION_3_1_1, std::max(1, options.max_inflight));
    client = std::make_unique<mqtt::async_client>(uri, options.client_id, create, nullptr);
    client->set_connection_lost_handler([this](const std::string& cause) {
      on_paho_thread(log, "connection-lost callback", [&] { handle_connection_lost(cause); });
    });
    client->set_message_callback([this](mqtt::const_message_ptr message) {
      on_paho_thread(log, "message callback", [&] { handle_message(message); });
    });
    client->set_connected_handler([this](const std::string&) {
      on_paho_thread(log, "connected callback", [&] { handle_connected(); });
    });
  });
  if (!created) {
    client.reset();
    create_error = created.error();
    log.error(kLog, create_error->to_string());
  }
}

PahoTransport::Impl::~Impl() {
  disconnect();
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  cv.notify_all();
  if (reconnect_thread.joinable()) reconnect_thread.join();
  if (!client) return;
  // Not connected any more. Destroying the client fails the requests still
  // pending, whose listeners (members) are still alive; none of our other
  // callbacks may run once the client is gone.
  Status status = guarded("stop callbacks", [&] { client->disable_callbacks(); });
  if (!status) log.debug(kLog, status.error().to_string());
  client.reset();
}

// ---- connect / disconnect --------------------------------------------------

Status PahoTransport::Impl::connect() {
  if (t_in_handler) return make_error("bad_call", "connect() called from a handler");
  if (create_error) return *create_error;
  std::lock_guard<std::mutex> serial(connect_mu);
  uint64_t losses_before = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (phase != Phase::kIdle) return {};  // up, or the reconnect loop owns it
    phase = Phase::kDown;
    attempting = true;
    losses_before = losses;
  }
  Result<bool> session_present = attempt_connect();
  if (session_present && session_up(*session_present, losses_before)) report_connection(true);
  {
    std::lock_guard<std::mutex> lock(mu);
    attempting = false;
    if (!session_present) phase = Phase::kIdle;
  }
  cv.notify_all();
  if (!session_present) return session_present.error();
  return {};
}

// The session's session_present flag, or why the attempt failed. An attempt
// that timed out is abandoned (DISCONNECT without waiting).
Result<bool> PahoTransport::Impl::attempt_connect() {
  std::string what = "connect to " + options.server_uri;
  mqtt::token_ptr token;
  Status status = guarded(what, [&] { token = client->connect(connect_options); });
  if (status) status = wait_token(*token, options.connect_timeout + 1s, what);
  if (!status) {
    if (status.error().code == "timeout") {
      Status aborted = guarded("abort connect", [&] { client->disconnect(0); });
      if (!aborted) log.debug(kLog, aborted.error().to_string());
    }
    log.warn(kLog, status.error().to_string());
    return status.error();
  }
  return token->get_connect_response().is_session_present();
}

void PahoTransport::Impl::disconnect() {
  if (t_in_handler) {
    log.error(kLog, "disconnect() called from a handler: ignored");
    return;
  }
  std::lock_guard<std::mutex> serial(connect_mu);
  {
    std::unique_lock<std::mutex> lock(mu);
    phase = Phase::kIdle;
    up = false;
    report_down = false;  // disconnect() never calls on_connection(false)
    cv.notify_all();
    cv.wait(lock, [this] { return !attempting; });  // bounded by connect_timeout
  }
  if (!client || !client->is_connected()) return;
  mqtt::token_ptr token;
  // Up to 1 s for in-flight messages.
  Status status = guarded("disconnect", [&] { token = client->disconnect(1000); });
  if (status) status = wait_token(*token, options.connect_timeout + 1s, "disconnect");
  if (!status) {
    log.warn(kLog, status.error().to_string());
  } else {
    log.info(kLog, "disconnected from " + options.server_uri);
  }
}

// ---- session setup ---------------------------------------------------------

// Returns true when the session is up and must be reported.
bool PahoTransport::Impl::session_up(bool session_present, uint64_t losses_before) {
  log.info(kLog, "connected to " + options.server_uri + " as " + options.client_id +
                     (session_present ? " (session present)" : " (new session)"));
  int dropped = session_present ? 0 : inflight.reset();
  if (dropped > 0) {
    log.warn(kLog, "the broker lost the session: " + std::to_string(dropped) +
                       " unacknowledged publish(es) dropped");
  }
  restore_subscriptions(session_present);
  return mark_up(losses_before);
}

void PahoTransport::Impl::restore_subscriptions(bool session_present) {
  std::vector<std::pair<std::string, int>> todo;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [filter, sub] : subscriptions) {
      if (!session_present) sub.confirmed = false;  // the broker forgot them
      if (!sub.confirmed) todo.emplace_back(filter, sub.qos);
    }
  }
  if (!todo.empty()) {
    log.info(kLog, "sending " + std::to_string(todo.size()) + " subscription(s) to the broker");
  }
  for (const auto& [filter, qos] : todo) {
    Status status = send_subscribe(filter, qos, /*wait=*/true);
    if (!status) log.warn(kLog, "restoring subscription failed: " + status.error().to_string());
  }
}

// Marks the session up unless it was lost while being set up (then the
// reconnect loop tries again) or disconnect() was called meanwhile.
bool PahoTransport::Impl::mark_up(uint64_t losses_before) {
  std::lock_guard<std::mutex> lock(mu);
  if (phase != Phase::kDown || losses != losses_before) return false;
  phase = Phase::kUp;
  attempt = 0;
  up = true;
  return true;
}

// Marked confirmed by subscribe_listener when the SUBACK comes.
Status PahoTransport::Impl::send_subscribe(const std::string& filter, int qos, bool wait) {
  std::string what = "subscribe '" + filter + "'";
  mqtt::token_ptr token;
  Status status =
      guarded(what, [&] { token = client->subscribe(filter, qos, nullptr, subscribe_listener); });
  if (!status || !wait) return status;
  return wait_token(*token, options.connect_timeout, what);
}

void PahoTransport::Impl::mark_confirmed(const std::string& filter) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = subscriptions.find(filter);
  if (it != subscriptions.end()) it->second.confirmed = true;
}

// ---- reconnect loop (own thread) --------------------------------------------

// Paho's automatic reconnect is not used: it retries without jitter (a fleet
// would reconnect in lockstep) and does not tell whether the broker kept the
// session. This thread is the only one that reports a lost session and,
// after a reconnect, the new one: reports stay in order. A loss is reported
// only once a running connect() has reported its success.
void PahoTransport::Impl::reconnect_loop() {
  std::unique_lock<std::mutex> lock(mu);
  for (;;) {
    cv.wait(lock,
            [this] { return stopping || (!attempting && (report_down || phase == Phase::kDown)); });
    if (stopping) return;
    if (report_down) {
      report_down = false;
      lock.unlock();
      report_connection(false);
      lock.lock();
      continue;
    }
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    auto delay =
        reconnect_delay(attempt++, options.reconnect_min, options.reconnect_max, unit(jitter));
    log.info(kLog, "reconnecting to " + options.server_uri + " in " +
                       std::to_string(delay.count()) + " ms (attempt " + std::to_string(attempt) +
                       ")");
    bool interrupted = cv.wait_for(lock, delay, [this] {
      return stopping || phase != Phase::kDown || attempting || report_down;
    });
    if (stopping) return;
    if (interrupted) continue;
    reconnect_once(lock);
  }
}

// REQUIRES: `lock` holds mu; phase == kDown and no attempt running.
void PahoTransport::Impl::reconnect_once(std::unique_lock<std::mutex>& lock) {
  attempting = true;
  uint64_t losses_before = losses;
  lock.unlock();
  Result<bool> session_present = attempt_connect();
  if (session_present && session_up(*session_present, losses_before)) report_connection(true);
  lock.lock();
  attempting = false;
  cv.notify_all();
}

// ---- Paho callbacks --------------------------------------------------------

void PahoTransport::Impl::handle_message(const mqtt::const_message_ptr& message) {
  MessageHandler handler;
  {
    std::lock_guard<std::mutex> lock(mu);
    handler = message_handler;
  }
  if (!handler || !message) return;
  Message msg{message->get_topic(), message->to_string(), message->get_qos(),
              message->is_retained()};
  HandlerScope scope;
  try {
    handler(msg);  // Paho sends the PUBACK when this returns
  } catch (const std::exception& e) {
    log.error(kLog, "message handler threw on '" + msg.topic + "': " + e.what());
  } catch (...) {
    log.error(kLog, "message handler threw on '" + msg.topic + "'");
  }
}

// Runs on every CONNACK, before Paho resends in-flight messages.
void PahoTransport::Impl::handle_connected() {
  if (!options.tcp_nodelay) return;
  if (!broker) {
    log.warn(kLog, "TCP_NODELAY not set: cannot parse " + options.server_uri);
    return;
  }
  Result<int> count = enable_tcp_nodelay_to_peer(broker->host, broker->port);
  if (!count) {
    log.warn(kLog, "TCP_NODELAY not set: " + count.error().to_string());
  } else if (*count == 0) {
    log.warn(kLog, "TCP_NODELAY not set: no socket to " + options.server_uri + " (proxy?)");
  } else {
    log.debug(kLog, "TCP_NODELAY set on " + std::to_string(*count) + " socket(s)");
  }
}

// Paho thread: only records the loss; the reconnect thread reports it.
void PahoTransport::Impl::handle_connection_lost(const std::string& cause) {
  log.warn(kLog, "connection to " + options.server_uri + " lost" +
                     (cause.empty() ? std::string() : ": " + cause));
  {
    std::lock_guard<std::mutex> lock(mu);
    ++losses;
    up = false;
    if (phase == Phase::kUp) {
      phase = Phase::kDown;
      report_down = true;
    }
  }
  cv.notify_all();
}

void PahoTransport::Impl::report_connection(bool up_now) {
  ConnectionHandler handler;
  {
    std::lock_guard<std::mutex> lock(mu);
    handler = connection_handler;
  }
  if (!handler) return;
  HandlerScope scope;
  on_paho_thread(log, "connection handler", [&] { handler(up_now); });
}

// ---- publish / subscribe ---------------------------------------------------

Status PahoTransport::Impl::publish(const Message& message) {
  if (!up) return make_error("not_connected", "not connected to " + options.server_uri);
  if (message.qos < 0 || message.qos > 2) {
    return make_error("bad_qos", "qos " + std::to_string(message.qos));
  }
  if (!InMemoryBus::is_valid_topic_name(message.topic)) {
    return make_error("bad_topic", "invalid topic name '" + message.topic + "'");
  }
  std::optional<uintptr_t> generation = inflight.acquire();
  if (!generation) {
    return make_error("queue_full", std::to_string(options.max_inflight) + " publishes in flight");
  }
  // Paho copies the payload before returning.
  Status status = guarded("publish '" + message.topic + "'", [&] {
    client->publish(message.topic, message.payload.data(), message.payload.size(), message.qos,
                    // Paho's context is an opaque pointer: the generation travels in
                    // it and comes back to publish_listener, never dereferenced.
                    // NOLINTNEXTLINE(performance-no-int-to-ptr)
                    message.retained, reinterpret_cast<void*>(*generation), publish_listener);
  });
  if (status) return {};
  inflight.release(*generation);
  log.warn(kLog, status.error().to_string());
  return status;
}

Status PahoTransport::Impl::subscribe(const std::string& filter, int qos) {
  if (qos < 0 || qos > 2) return make_error("bad_qos", "qos " + std::to_string(qos));
  if (!InMemoryBus::is_valid_topic_filter(filter)) {
    return make_error("bad_topic_filter", "invalid topic filter '" + filter + "'");
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    subscriptions[filter] = Subscription{qos, false};
  }
  if (!up) return {};  // sent when the session comes up
  Status status = send_subscribe(filter, qos, /*wait=*/!t_in_handler);
  if (!status) log.warn(kLog, status.error().to_string());
  return status;
}

Status PahoTransport::Impl::subscribe_many(const std::vector<std::string>& filters, int qos) {
  if (qos < 0 || qos > 2) return make_error("bad_qos", "qos " + std::to_string(qos));
  for (const auto& filter : filters) {
    if (!InMemoryBus::is_valid_topic_filter(filter)) {
      return make_error("bad_topic_filter", "invalid topic filter '" + filter + "'");
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& filter : filters) subscriptions[filter] = Subscription{qos, false};
  }
  if (!up) return {};  // sent when the session comes up
  // Every packet goes out before the first SUBACK is awaited: one round
  // trip for them all. Packets of kPacketFilters: a few kilobytes each.
  constexpr size_t kPacketFilters = 128;
  std::vector<mqtt::token_ptr> pending;
  for (size_t at = 0; at < filters.size(); at += kPacketFilters) {
    size_t end = std::min(filters.size(), at + kPacketFilters);
    std::vector<std::string> packet(filters.begin() + static_cast<std::ptrdiff_t>(at),
                                    filters.begin() + static_cast<std::ptrdiff_t>(end));
    auto token = send_subscribe_packet(packet, qos);
    if (!token.ok()) {
      log.warn(kLog, token.error().to_string());
      return token.error();
    }
    pending.push_back(std::move(token).value());
  }
  if (t_in_handler) return {};  // a handler must not wait for the broker
  const auto deadline = std::chrono::steady_clock::now() + options.connect_timeout;
  const std::string what = "subscribe to " + std::to_string(filters.size()) + " filters";
  for (const auto& token : pending) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (Status s = wait_token(*token, std::max(left, std::chrono::milliseconds(0)), what); !s) {
      return s;
    }
  }
  return {};
}

// One SUBSCRIBE of `filters`; subscribe_listener marks them SUBACKed.
Result<mqtt::token_ptr> PahoTransport::Impl::send_subscribe_packet(
    const std::vector<std::string>& filters, int qos) {
  auto topics = mqtt::string_collection::create(filters);
  mqtt::iasync_client::qos_collection qoss(filters.size(), qos);
  mqtt::token_ptr token;
  Status status = guarded("subscribe to " + std::to_string(filters.size()) + " filters", [&] {
    token = client->subscribe(topics, qoss, nullptr, subscribe_listener);
  });
  if (!status) return status.error();
  return token;
}

Status PahoTransport::Impl::unsubscribe(const std::string& filter) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (subscriptions.erase(filter) == 0) return {};
  }
  if (!up) return {};  // a session that comes back without it never had it restored
  Status status = guarded("unsubscribe '" + filter + "'", [&] { client->unsubscribe(filter); });
  if (!status) log.warn(kLog, status.error().to_string());
  return status;
}

// ---- PahoTransport ---------------------------------------------------------

PahoTransport::PahoTransport(Options options, Logger& logger)
    : impl_(std::make_unique<Impl>(std::move(options), logger)) {}

PahoTransport::~PahoTransport() = default;

void PahoTransport::on_message(MessageHandler handler) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->message_handler = std::move(handler);
}

void PahoTransport::on_connection(ConnectionHandler handler) {
  std::lock_guard<std::mutex> lock(impl_->mu);
  impl_->connection_handler = std::move(handler);
}

Status PahoTransport::connect() { return impl_->connect(); }
void PahoTransport::disconnect() { impl_->disconnect(); }
bool PahoTransport::connected() const { return impl_->up; }
Status PahoTransport::publish(const Message& message) { return impl_->publish(message); }
Status PahoTransport::subscribe(const std::string& topic_filter, int qos) {
  return impl_->subscribe(topic_filter, qos);
}
Status PahoTransport::subscribe_many(const std::vector<std::string>& topic_filters, int qos) {
  return impl_->subscribe_many(topic_filters, qos);
}
Status PahoTransport::unsubscribe(const std::string& topic_filter) {
  return impl_->unsubscribe(topic_filter);
}
int PahoTransport::inflight() const { return impl_->inflight.count(); }

}  // namespace vend
