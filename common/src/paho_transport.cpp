#include "vend/paho_transport.hpp"

#include <MQTTAsync.h>
#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
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

constexpr std::string_view kLog = "mqtt";

// Paho initializes all of OpenSSL (error strings, every algorithm) for its
// first client unless told not to, about 1.5 MB resident even for a tcp://
// client. It is told not to; a TLS client initializes libssl itself. Once per
// process each.
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

bool same_endpoint(const sockaddr_storage& a, const sockaddr_storage& b) {
  if (a.ss_family != b.ss_family) return false;
  if (a.ss_family == AF_INET) {
    const auto& x = reinterpret_cast<const sockaddr_in&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in&>(b);
    return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
  }
  if (a.ss_family == AF_INET6) {
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
  }
  return false;
}

Result<std::vector<sockaddr_storage>> resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
  if (rc != 0) return make_error("resolve_failed", host + ": " + gai_strerror(rc));
  std::vector<sockaddr_storage> out;
  for (addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
    sockaddr_storage ss{};
    std::memcpy(&ss, ai->ai_addr, std::min<size_t>(ai->ai_addrlen, sizeof ss));
    out.push_back(ss);
  }
  freeaddrinfo(list);
  return out;
}

// True when `fd` is a stream socket whose peer is one of `peers`.
bool is_stream_socket_to(int fd, const std::vector<sockaddr_storage>& peers) {
  int type = 0;
  socklen_t type_len = sizeof type;
  if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM) {
    return false;  // not a socket (ENOTSOCK) or not TCP
  }
  sockaddr_storage peer{};
  socklen_t len = sizeof peer;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &len) != 0) return false;
  return std::any_of(peers.begin(), peers.end(),
                     [&](const sockaddr_storage& p) { return same_endpoint(p, peer); });
}

// A Paho return code as an error value: "not_connected", "queue_full" or
// "mqtt_error". `detail` is Paho's message when it gave one.
Error paho_error(const std::string& what, int rc, const char* detail = nullptr) {
  std::string text = what + ": " + (detail != nullptr ? detail : MQTTAsync_strerror(rc)) + " (rc " +
                     std::to_string(rc) + ")";
  if (rc == MQTTASYNC_DISCONNECTED) return make_error("not_connected", text);
  if (rc == MQTTASYNC_MAX_MESSAGES_INFLIGHT || rc == MQTTASYNC_MAX_BUFFERED_MESSAGES) {
    return make_error("queue_full", text);
  }
  return make_error("mqtt_error", text);
}

// The outcome of one Paho request a caller waits for. Shared between the
// waiting caller and the request's callback, which may come after the caller
// gave up waiting. Thread-safe.
class Completion {
 public:
  void finish(int rc, bool session_present, const char* message) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
      rc_ = rc;
      session_present_ = session_present;
      if (message != nullptr) message_ = message;
    }
    cv_.notify_all();
  }
  // False when the request did not complete within `timeout`.
  bool wait_for(std::chrono::milliseconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [this] { return done_; });
  }
  // REQUIRES: wait_for() returned true.
  int rc() const {
    std::lock_guard<std::mutex> lock(mu_);
    return rc_;
  }
  bool session_present() const {
    std::lock_guard<std::mutex> lock(mu_);
    return session_present_;
  }
  // Paho's message, or nullptr.
  const char* message() const {
    std::lock_guard<std::mutex> lock(mu_);
    return message_.empty() ? nullptr : message_.c_str();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  int rc_ = MQTTASYNC_SUCCESS;
  bool session_present_ = false;
  std::string message_;
};

// Publishes sent but not yet completed (PUBACK for QoS 1, written for QoS 0).
// When the broker lost the session, Paho C drops the pending publishes
// (MQTTAsync_cleanSession; 1.3.12 fails their tokens with rc -11). Should a
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

// ---- free functions --------------------------------------------------------

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

// Paho C never sets TCP_NODELAY and offers no socket hook, so the adapter
// finds its socket by peer address. Scanning /proc/self/fd is O(open fds),
// done once per (re)connect. If an fd is closed and reused between
// getpeername() and setsockopt(), NODELAY lands on an unrelated TCP socket:
// harmless.
Result<int> enable_tcp_nodelay_to_peer(const std::string& host, int port) {
  Result<std::vector<sockaddr_storage>> peers = resolve(host, port);
  if (!peers) return peers.error();
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return make_error("proc_unavailable", "cannot open /proc/self/fd");
  int own_fd = dirfd(dir);
  int found = 0;
  while (dirent* entry = readdir(dir)) {
    std::string_view name = entry->d_name;
    int fd = -1;
    auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), fd);
    if (ec != std::errc() || ptr != name.data() + name.size() || fd == own_fd) continue;
    if (!is_stream_socket_to(fd, *peers)) continue;
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0) ++found;
  }
  closedir(dir);
  return found;
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

  // The context of one Paho request other than connect. Paho calls exactly
  // one of its callbacks (on completion, or with MQTTASYNC_OPERATION_INCOMPLETE
  // when the session is cleaned or the client destroyed), which deletes it.
  struct Request {
    enum class Kind { kPublish, kSubscribe, kOther };
    Impl& impl;
    Kind kind;
    uintptr_t generation = 0;                // kPublish: its in-flight window slot
    std::vector<std::string> filters;        // kSubscribe: one, or one packet's
    std::shared_ptr<Completion> completion;  // null when nobody waits
  };

  Impl(Options opts, Logger& logger);
  ~Impl();

  void create_client();
  void build_connect_options();
  Status connect();
  void disconnect();
  Status publish(const Message& message);
  Status subscribe(const std::string& filter, int qos);
  Status unsubscribe(const std::string& filter);
  Status subscribe_many(const std::vector<std::string>& filters, int qos);
  Status send_subscribe_packet(std::vector<std::string> filters, int qos,
                               std::shared_ptr<Completion> completion);
  Status wait_subscribed(const std::vector<std::shared_ptr<Completion>>& pending, size_t filters);

  Result<bool> attempt_connect();
  void abort_connect();
  bool session_up(bool session_present, uint64_t losses_before);
  void restore_subscriptions(bool session_present);
  Status send_subscribe(const std::string& filter, int qos, bool wait);
  void mark_confirmed(const std::string& filter);
  bool mark_up(uint64_t losses_before);
  void reconnect_loop();
  void reconnect_once(std::unique_lock<std::mutex>& lock);

  // Paho callbacks (Paho threads); `context` is the Impl or a Request.
  static void on_connect_success(void* context, MQTTAsync_successData* data);
  static void on_connect_failure(void* context, MQTTAsync_failureData* data);
  static void on_request_success(void* context, MQTTAsync_successData* data);
  // The disconnect's callbacks (context: the Impl). Paho may never call
  // them (the broker gone); nothing is allocated for them, so nothing leaks.
  static void on_disconnect_success(void* context, MQTTAsync_successData* data);
  static void on_disconnect_failure(void* context, MQTTAsync_failureData* data);
  void finish_disconnect(int rc, const char* message);
  static void on_request_failure(void* context, MQTTAsync_failureData* data);
  static int on_message_arrived(void* context, char* topic, int topic_len,
                                MQTTAsync_message* message);
  static void on_connected(void* context, char* cause);
  static void on_connection_lost(void* context, char* cause);
  void finish_connect(int rc, bool session_present, const char* message);
  void finish_request(Request& request, int rc, const char* message);
  void handle_message(Message message);
  void handle_connected();
  void handle_connection_lost(const std::string& cause);
  void report_connection(bool up_now);

  const Options options;
  Logger& log;
  const std::optional<HostPort> broker;
  std::optional<Error> create_error;  // set when the Paho client could not be made
  // What connect_options points into; built once, never changed.
  MQTTAsync_connectOptions connect_options = MQTTAsync_connectOptions_initializer;
  MQTTAsync_willOptions will_options = MQTTAsync_willOptions_initializer;
  MQTTAsync_SSLOptions ssl_options = MQTTAsync_SSLOptions_initializer;
  InflightWindow inflight;
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
  // The running connect attempt's outcome. A late callback of an attempt
  // that timed out may complete the next one: that one then fails and is
  // retried.
  std::shared_ptr<Completion> pending_connect;
  std::shared_ptr<Completion> pending_disconnect;  // the running disconnect's outcome
  std::mt19937_64 jitter;                          // reconnect thread only

  MQTTAsync client = nullptr;  // destroyed first (~Impl)
  std::thread reconnect_thread;
};

PahoTransport::Impl::Impl(Options opts, Logger& logger)
    : options(std::move(opts)),
      log(logger),
      broker(parse_server_uri(options.server_uri)),
      inflight(options.max_inflight),
      jitter(std::random_device{}() ^ std::hash<std::string>{}(options.client_id)) {
  create_client();
  reconnect_thread = std::thread([this] { reconnect_loop(); });
}

void PahoTransport::Impl::create_client() {
  const std::string& uri = options.server_uri;
  init_libraries(options.tls.has_value() || uri.rfind("ssl://", 0) == 0 ||
                 uri.rfind("mqtts://", 0) == 0 || uri.rfind("wss://", 0) == 0);
  build_connect_options();
  // No Paho persistence: unacknowledged device events live in the firmware
  // outbox, not in Paho files in the working directory.
  int rc = MQTTAsync_create(&client, uri.c_str(), options.client_id.c_str(),
                            MQTTCLIENT_PERSISTENCE_NONE, nullptr);
  if (rc == MQTTASYNC_SUCCESS) {
    rc = MQTTAsync_setCallbacks(client, this, &Impl::on_connection_lost, &Impl::on_message_arrived,
                                nullptr);
  }
  if (rc == MQTTASYNC_SUCCESS) rc = MQTTAsync_setConnected(client, this, &Impl::on_connected);
  if (rc != MQTTASYNC_SUCCESS) {
    if (client != nullptr) MQTTAsync_destroy(&client);
    client = nullptr;
    create_error = paho_error("create client for " + uri, rc);
    log.error(kLog, create_error->to_string());
  }
}

// The strings pointed to live in `options`, which never changes.
void PahoTransport::Impl::build_connect_options() {
  MQTTAsync_connectOptions& opts = connect_options;
  opts.MQTTVersion = MQTTVERSION_3_1_1;
  opts.cleansession = options.clean_session ? 1 : 0;
  opts.keepAliveInterval = options.keep_alive_s;
  auto timeout_s = std::chrono::ceil<std::chrono::seconds>(options.connect_timeout).count();
  opts.connectTimeout = static_cast<int>(std::max<int64_t>(timeout_s, 1));
  opts.maxInflight = options.max_inflight;
  opts.automaticReconnect = 0;  // our own loop: jitter + session checks
  if (options.username) opts.username = options.username->c_str();
  if (options.password) {
    opts.binarypwd.data = options.password->data();
    opts.binarypwd.len = static_cast<int>(options.password->size());
  }
  if (options.will) {
    const Will& w = *options.will;
    will_options.topicName = w.topic.c_str();
    will_options.message = nullptr;
    will_options.payload.data = w.payload.data();
    will_options.payload.len = static_cast<int>(w.payload.size());
    will_options.qos = w.qos;
    will_options.retained = w.retained ? 1 : 0;
    opts.will = &will_options;
  }
  if (options.tls) {
    const PahoTlsOptions& tls = *options.tls;
    ssl_options.trustStore = tls.ca_file.c_str();
    if (!tls.cert_file.empty()) ssl_options.keyStore = tls.cert_file.c_str();
    if (!tls.key_file.empty()) ssl_options.privateKey = tls.key_file.c_str();
    ssl_options.enableServerCertAuth = 1;
    opts.ssl = &ssl_options;
  }
  opts.context = this;
  opts.onSuccess = &Impl::on_connect_success;
  opts.onFailure = &Impl::on_connect_failure;
}

PahoTransport::Impl::~Impl() {
  disconnect();
  {
    std::lock_guard<std::mutex> lock(mu);
    stopping = true;
  }
  cv.notify_all();
  if (reconnect_thread.joinable()) reconnect_thread.join();
  if (client == nullptr) return;
  // Not connected any more, so Paho accepts new callbacks: none of ours may
  // run once the members they touch are gone. MQTTAsync_destroy fails the
  // requests still pending (their Requests are freed by on_request_failure).
  MQTTAsync_setCallbacks(
      client, nullptr, nullptr,
      [](void*, char* topic, int, MQTTAsync_message* message) {
        MQTTAsync_freeMessage(&message);
        MQTTAsync_free(topic);
        return 1;
      },
      nullptr);
  MQTTAsync_setConnected(client, nullptr, nullptr);
  MQTTAsync_destroy(&client);
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

Result<bool> PahoTransport::Impl::attempt_connect() {
  auto completion = std::make_shared<Completion>();
  {
    std::lock_guard<std::mutex> lock(mu);
    pending_connect = completion;
  }
  std::string what = "connect to " + options.server_uri;
  int rc = MQTTAsync_connect(client, &connect_options);
  if (rc != MQTTASYNC_SUCCESS) {
    Error error = paho_error(what, rc);
    log.warn(kLog, error.to_string());
    return error;
  }
  if (!completion->wait_for(options.connect_timeout + std::chrono::seconds(1))) {
    abort_connect();
    Error error = make_error("timeout", what + " timed out");
    log.warn(kLog, error.to_string());
    return error;
  }
  if (completion->rc() != MQTTASYNC_SUCCESS) {
    Error error = paho_error(what, completion->rc(), completion->message());
    log.warn(kLog, error.to_string());
    return error;
  }
  return completion->session_present();
}

void PahoTransport::Impl::abort_connect() {
  MQTTAsync_disconnectOptions opts = MQTTAsync_disconnectOptions_initializer;
  opts.timeout = 0;
  int rc = MQTTAsync_disconnect(client, &opts);
  if (rc != MQTTASYNC_SUCCESS) log.debug(kLog, "abort connect: rc " + std::to_string(rc));
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
  if (client == nullptr || !MQTTAsync_isConnected(client)) return;
  auto completion = std::make_shared<Completion>();
  {
    std::lock_guard<std::mutex> lock(mu);
    pending_disconnect = completion;
  }
  MQTTAsync_disconnectOptions opts = MQTTAsync_disconnectOptions_initializer;
  opts.timeout = 1000;
  opts.context = this;
  opts.onSuccess = &Impl::on_disconnect_success;
  opts.onFailure = &Impl::on_disconnect_failure;
  int rc = MQTTAsync_disconnect(client, &opts);
  if (rc != MQTTASYNC_SUCCESS) {
    log.warn(kLog, paho_error("disconnect", rc).to_string());
    return;
  }
  if (!completion->wait_for(options.connect_timeout + std::chrono::seconds(1))) {
    log.warn(kLog, "disconnect from " + options.server_uri + " timed out");
  } else if (completion->rc() != MQTTASYNC_SUCCESS) {
    log.warn(kLog, paho_error("disconnect", completion->rc(), completion->message()).to_string());
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

Status PahoTransport::Impl::send_subscribe(const std::string& filter, int qos, bool wait) {
  auto completion = wait ? std::make_shared<Completion>() : nullptr;
  auto* request = new Request{*this, Request::Kind::kSubscribe, 0, {filter}, completion};
  MQTTAsync_responseOptions opts = MQTTAsync_responseOptions_initializer;
  opts.context = request;
  opts.onSuccess = &Impl::on_request_success;
  opts.onFailure = &Impl::on_request_failure;
  std::string what = "subscribe '" + filter + "'";
  int rc = MQTTAsync_subscribe(client, filter.c_str(), qos, &opts);
  if (rc != MQTTASYNC_SUCCESS) {
    delete request;
    return paho_error(what, rc);
  }
  if (!wait) return {};
  if (!completion->wait_for(options.connect_timeout)) {
    return make_error("timeout", "no SUBACK for '" + filter + "'");
  }
  if (completion->rc() != MQTTASYNC_SUCCESS) {
    return paho_error(what, completion->rc(), completion->message());
  }
  return {};  // marked confirmed by on_request_success
}

void PahoTransport::Impl::mark_confirmed(const std::string& filter) {
  std::lock_guard<std::mutex> lock(mu);
  auto it = subscriptions.find(filter);
  if (it != subscriptions.end()) it->second.confirmed = true;
}

// ---- reconnect loop (own thread) --------------------------------------------

// The only thread that reports a lost session and, after a reconnect, the
// new one: reports stay in order. A loss is reported only once a running
// connect() has reported its success.
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

void PahoTransport::Impl::on_connect_success(void* context, MQTTAsync_successData* data) {
  bool session_present = data != nullptr && data->alt.connect.sessionPresent != 0;
  static_cast<Impl*>(context)->finish_connect(MQTTASYNC_SUCCESS, session_present, nullptr);
}

void PahoTransport::Impl::on_connect_failure(void* context, MQTTAsync_failureData* data) {
  int rc = data != nullptr ? data->code : MQTTASYNC_FAILURE;
  // Paho reports some failures with code 0 and only a message.
  if (rc == MQTTASYNC_SUCCESS) rc = MQTTASYNC_FAILURE;
  static_cast<Impl*>(context)->finish_connect(rc, false, data != nullptr ? data->message : nullptr);
}

void PahoTransport::Impl::finish_connect(int rc, bool session_present, const char* message) {
  std::shared_ptr<Completion> completion;
  {
    std::lock_guard<std::mutex> lock(mu);
    completion = std::move(pending_connect);
  }
  if (completion) completion->finish(rc, session_present, message);
}

void PahoTransport::Impl::on_request_success(void* context, MQTTAsync_successData* data) {
  std::unique_ptr<Request> request(static_cast<Request*>(context));
  // A SUBSCRIBE of several filters succeeds as a packet; its SUBACK grants
  // each filter a QoS or refuses it (0x80): the refused stay unconfirmed.
  if (request->kind == Request::Kind::kSubscribe && request->filters.size() > 1 &&
      data != nullptr && data->alt.qosList != nullptr) {
    std::vector<std::string> granted;
    for (size_t i = 0; i < request->filters.size(); ++i) {
      if (data->alt.qosList[i] == 0x80) {
        request->impl.log.warn(kLog, "subscribe '" + request->filters[i] + "' refused");
      } else {
        granted.push_back(std::move(request->filters[i]));
      }
    }
    request->filters = std::move(granted);
  }
  request->impl.finish_request(*request, MQTTASYNC_SUCCESS, nullptr);
}

void PahoTransport::Impl::on_request_failure(void* context, MQTTAsync_failureData* data) {
  std::unique_ptr<Request> request(static_cast<Request*>(context));
  int rc = data != nullptr ? data->code : MQTTASYNC_FAILURE;
  if (rc == MQTTASYNC_SUCCESS) rc = MQTTASYNC_FAILURE;
  request->impl.finish_request(*request, rc, data != nullptr ? data->message : nullptr);
}

void PahoTransport::Impl::on_disconnect_success(void* context, MQTTAsync_successData*) {
  static_cast<Impl*>(context)->finish_disconnect(MQTTASYNC_SUCCESS, nullptr);
}

void PahoTransport::Impl::on_disconnect_failure(void* context, MQTTAsync_failureData* data) {
  int rc = data != nullptr ? data->code : MQTTASYNC_FAILURE;
  if (rc == MQTTASYNC_SUCCESS) rc = MQTTASYNC_FAILURE;
  static_cast<Impl*>(context)->finish_disconnect(rc, data != nullptr ? data->message : nullptr);
}

void PahoTransport::Impl::finish_disconnect(int rc, const char* message) {
  std::shared_ptr<Completion> completion;
  {
    std::lock_guard<std::mutex> lock(mu);
    completion = std::move(pending_disconnect);
  }
  if (completion) completion->finish(rc, false, message);
}

void PahoTransport::Impl::finish_request(Request& request, int rc, const char* message) {
  switch (request.kind) {
    case Request::Kind::kPublish:
      inflight.release(request.generation);
      if (rc != MQTTASYNC_SUCCESS) log.debug(kLog, "publish failed, rc " + std::to_string(rc));
      break;
    case Request::Kind::kSubscribe:
      // Marks subscriptions SUBACKed, so a reconnect with session_present
      // only re-sends the ones that never were.
      if (rc == MQTTASYNC_SUCCESS) {
        for (const auto& filter : request.filters) mark_confirmed(filter);
      } else {
        log.warn(kLog, "subscribe failed, rc " + std::to_string(rc));
      }
      break;
    case Request::Kind::kOther: break;
  }
  if (request.completion) request.completion->finish(rc, false, message);
}

int PahoTransport::Impl::on_message_arrived(void* context, char* topic, int topic_len,
                                            MQTTAsync_message* message) {
  // topic_len is 0 when the topic is NUL-terminated.
  Message msg{topic_len > 0 ? std::string(topic, static_cast<size_t>(topic_len)) : topic,
              std::string(static_cast<const char*>(message->payload),
                          static_cast<size_t>(message->payloadlen)),
              message->qos, message->retained != 0};
  MQTTAsync_freeMessage(&message);
  MQTTAsync_free(topic);
  static_cast<Impl*>(context)->handle_message(std::move(msg));
  return 1;  // handled: Paho sends the PUBACK
}

void PahoTransport::Impl::on_connected(void* context, char*) {
  static_cast<Impl*>(context)->handle_connected();
}

void PahoTransport::Impl::on_connection_lost(void* context, char* cause) {
  static_cast<Impl*>(context)->handle_connection_lost(cause != nullptr ? cause : "");
}

void PahoTransport::Impl::handle_message(Message msg) {
  MessageHandler handler;
  {
    std::lock_guard<std::mutex> lock(mu);
    handler = message_handler;
  }
  if (!handler) return;
  HandlerScope scope;
  try {
    handler(msg);
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
  try {
    handler(up_now);
  } catch (const std::exception& e) {
    log.error(kLog, std::string("connection handler threw: ") + e.what());
  } catch (...) {
    log.error(kLog, "connection handler threw");
  }
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
  auto* request = new Request{*this, Request::Kind::kPublish, *generation, {}, nullptr};
  MQTTAsync_responseOptions opts = MQTTAsync_responseOptions_initializer;
  opts.context = request;
  opts.onSuccess = &Impl::on_request_success;
  opts.onFailure = &Impl::on_request_failure;
  MQTTAsync_message msg = MQTTAsync_message_initializer;
  // Paho copies the payload before returning.
  msg.payload = const_cast<char*>(message.payload.data());
  msg.payloadlen = static_cast<int>(message.payload.size());
  msg.qos = message.qos;
  msg.retained = message.retained ? 1 : 0;
  int rc = MQTTAsync_sendMessage(client, message.topic.c_str(), &msg, &opts);
  if (rc == MQTTASYNC_SUCCESS) return {};
  delete request;
  inflight.release(*generation);
  Error error = paho_error("publish '" + message.topic + "'", rc);
  log.warn(kLog, error.to_string());
  return error;
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

Status PahoTransport::Impl::unsubscribe(const std::string& filter) {
  {
    std::lock_guard<std::mutex> lock(mu);
    if (subscriptions.erase(filter) == 0) return {};
  }
  if (!up) return {};  // a session that comes back without it never had it restored
  auto* request = new Request{*this, Request::Kind::kOther, 0, {}, nullptr};
  MQTTAsync_responseOptions opts = MQTTAsync_responseOptions_initializer;
  opts.context = request;
  opts.onSuccess = &Impl::on_request_success;
  opts.onFailure = &Impl::on_request_failure;
  int rc = MQTTAsync_unsubscribe(client, filter.c_str(), &opts);
  if (rc == MQTTASYNC_SUCCESS) return {};
  delete request;
  Error error = paho_error("unsubscribe '" + filter + "'", rc);
  log.warn(kLog, error.to_string());
  return error;
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
  const bool wait = !t_in_handler;
  std::vector<std::shared_ptr<Completion>> pending;
  for (size_t at = 0; at < filters.size(); at += kPacketFilters) {
    size_t end = std::min(filters.size(), at + kPacketFilters);
    std::vector<std::string> packet(filters.begin() + static_cast<std::ptrdiff_t>(at),
                                    filters.begin() + static_cast<std::ptrdiff_t>(end));
    auto completion = wait ? std::make_shared<Completion>() : nullptr;
    if (Status s = send_subscribe_packet(std::move(packet), qos, completion); !s.ok()) {
      log.warn(kLog, s.error().to_string());
      return s;
    }
    if (completion) pending.push_back(std::move(completion));
  }
  return wait_subscribed(pending, filters.size());
}

// One SUBSCRIBE of `filters`; finish_request() confirms them and then
// completes `completion` (if any).
Status PahoTransport::Impl::send_subscribe_packet(std::vector<std::string> filters, int qos,
                                                  std::shared_ptr<Completion> completion) {
  std::vector<char*> topics;
  for (const auto& filter : filters) topics.push_back(const_cast<char*>(filter.c_str()));
  std::vector<int> qoss(filters.size(), qos);
  const std::string what = "subscribe to " + std::to_string(filters.size()) + " filters";
  auto* request =
      new Request{*this, Request::Kind::kSubscribe, 0, std::move(filters), std::move(completion)};
  MQTTAsync_responseOptions opts = MQTTAsync_responseOptions_initializer;
  opts.context = request;
  opts.onSuccess = &Impl::on_request_success;
  opts.onFailure = &Impl::on_request_failure;
  // Paho copies the topics before it returns (the request keeps its own).
  int rc = MQTTAsync_subscribeMany(client, static_cast<int>(topics.size()), topics.data(),
                                   qoss.data(), &opts);
  if (rc == MQTTASYNC_SUCCESS) return {};
  delete request;
  return paho_error(what, rc);
}

// Waits for every packet's SUBACK, all within one connect_timeout.
Status PahoTransport::Impl::wait_subscribed(const std::vector<std::shared_ptr<Completion>>& pending,
                                            size_t filters) {
  const auto deadline = std::chrono::steady_clock::now() + options.connect_timeout;
  for (const auto& completion : pending) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (!completion->wait_for(std::max(left, std::chrono::milliseconds(0)))) {
      return make_error("timeout",
                        "no SUBACK for some of " + std::to_string(filters) + " topic filters");
    }
    if (completion->rc() != MQTTASYNC_SUCCESS) {
      return paho_error("subscribe to " + std::to_string(filters) + " filters", completion->rc(),
                        completion->message());
    }
  }
  return {};
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
