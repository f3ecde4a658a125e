// PahoTransport: vend::Transport over a real MQTT 3.1.1 broker, through the
// Eclipse Paho C asynchronous client, MQTTAsync (target vend_mqtt; Paho stays
// out of this header). See docs/mqtt.md for the semantics and the broker
// configuration it needs.
//
// What it guarantees:
//   - QoS 1 in both directions, a persistent session by default
//     (clean_session = false), the configured last will;
//   - its own reconnect loop with jittered exponential backoff
//     (reconnect_delay()), so a fleet does not reconnect in lockstep; after a
//     reconnect where the broker lost the session (session_present = false)
//     every remembered subscription is sent again;
//   - TCP_NODELAY on the client socket after every (re)connect (Paho has no
//     option for it; see enable_tcp_nodelay_to_peer());
//   - failures are vend::Error values ("not_connected", "queue_full",
//     "timeout", "mqtt_error"), logged under the component "mqtt"; an
//     exception thrown by a handler stops at the adapter (logged);
//   - publish() never blocks: it fails fast when the session is down or when
//     max_inflight messages are already waiting for their PUBACK.
//
// Thread model: handlers run on a transport thread, never on the caller's
// thread (one exception below):
//   - on_message: on Paho's receive thread (one per process, shared by all
//     Paho clients), one message at a time, in arrival order. Its PUBACK is
//     sent when the handler returns (at-least-once), and the next message of
//     every client in the process waits: return quickly, hand work over.
//   - on_connection: on the adapter's reconnect thread, in order (false after
//     a loss, true after each reconnect); on_connection(true) of the first
//     connect() runs inside connect() on the caller's thread.
//   A message handler and a connection handler may run at the same time.
// No lock of the adapter is held while a handler runs. A handler may call
// publish() and subscribe() (which then does not wait for the SUBACK); it must
// not call connect(), disconnect() (refused and logged) or destroy the
// transport.
//
// All public methods are thread-safe. Non-copyable, non-movable. The
// destructor disconnects cleanly (no will) and stops all threads.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "vend/log.hpp"
#include "vend/result.hpp"
#include "vend/transport.hpp"

namespace vend {

struct PahoTlsOptions {
  std::string ca_file;    // PEM trust store for the server certificate
  std::string cert_file;  // client certificate (PEM), optional
  std::string key_file;   // client private key (PEM), optional
};

struct PahoOptions {
  // "tcp://host:port" or "ssl://host:port" ("mqtt://", "mqtts://" too).
  std::string server_uri;
  std::string client_id;
  std::optional<std::string> username;
  std::optional<std::string> password;
  std::optional<PahoTlsOptions> tls;
  int keep_alive_s = 30;
  std::optional<Will> will;
  // Persistent session: the broker keeps subscriptions and queues QoS 1
  // messages while this client is offline.
  bool clean_session = false;
  // Messages published but not yet acknowledged (PUBACK, or written for
  // QoS 0). Beyond it publish() returns "queue_full". Unacknowledged QoS 1
  // messages stay in the window across a reconnect where the broker kept the
  // session (Paho resends them); when the broker lost the session Paho drops
  // them and the window empties. Size it for the burst the client must absorb
  // (docs/mqtt.md); Paho C's own window is set to the same value.
  int max_inflight = 1000;
  // Bound on one connect attempt and on waiting for a SUBACK / disconnect.
  std::chrono::milliseconds connect_timeout{5000};
  // Reconnect backoff: attempt n waits a random time in
  // [b/2, b] with b = min(reconnect_max, reconnect_min * 2^n).
  std::chrono::milliseconds reconnect_min{500};
  std::chrono::milliseconds reconnect_max{30000};
  // Off only to measure what Nagle costs (docs/mqtt.md).
  bool tcp_nodelay = true;
};

class PahoTransport final : public Transport {
 public:
  using Options = PahoOptions;

  // Creates the Paho client (no network I/O yet). `logger` must outlive the
  // transport. An invalid server_uri or client id is reported by connect().
  PahoTransport(Options options, Logger& logger);
  ~PahoTransport() override;
  PahoTransport(const PahoTransport&) = delete;
  PahoTransport& operator=(const PahoTransport&) = delete;

  void on_message(MessageHandler handler) override;
  void on_connection(ConnectionHandler handler) override;

  // Blocks up to connect_timeout (plus one SUBACK wait per remembered
  // subscription). On success the session is up (remembered subscriptions
  // restored), on_connection(true) has run, and the reconnect loop watches
  // the connection from now on (if the connection dropped during that setup,
  // the loop reconnects and reports true later). On failure ("mqtt_error",
  // "timeout") nothing retries in the background: call connect() again.
  // Returns OK at once when already connected or reconnecting.
  Status connect() override;
  // Stops reconnecting and sends DISCONNECT (no will), waiting up to ~1 s for
  // in-flight messages. Does not call on_connection(false), and drops a loss
  // not yet reported. connect() may be called again afterwards.
  void disconnect() override;
  bool connected() const override;

  // Errors: "not_connected", "queue_full", "bad_qos", "mqtt_error".
  Status publish(const Message& message) override;
  // Remembers the subscription (restored after a reconnect that lost the
  // session) and, when connected, waits for the SUBACK up to connect_timeout.
  // Called while disconnected it is only remembered and returns OK.
  // Errors: "bad_qos", "timeout", "mqtt_error" (e.g. refused by the broker).
  Status subscribe(const std::string& topic_filter, int qos = 1) override;
  // Remembers them all and, when connected, sends them in SUBSCRIBE packets
  // of up to 128 filters each, all at once, then waits for their SUBACKs:
  // one round trip in all, up to connect_timeout (not in a handler: there
  // it does not wait). A filter the broker refuses is logged and stays
  // unconfirmed (sent again after a reconnect). Errors: "bad_qos",
  // "bad_topic_filter" (then none is sent), "timeout", "mqtt_error".
  Status subscribe_many(const std::vector<std::string>& topic_filters, int qos = 1) override;
  // Does not wait for the UNSUBACK.
  Status unsubscribe(const std::string& topic_filter) override;

  // Publishes not yet acknowledged (for metrics and tests).
  int inflight() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Delay before reconnect attempt `attempt` (0-based):
// b = min(max, min * 2^attempt), result in [b/2, b] picked by `unit` in [0, 1).
// Pure, for tests and for anyone who needs the same policy.
std::chrono::milliseconds reconnect_delay(int attempt, std::chrono::milliseconds min,
                                          std::chrono::milliseconds max, double unit);

// Sets TCP_NODELAY on every TCP socket of this process whose peer is
// host:port (host resolved with getaddrinfo), found through /proc/self/fd.
// Returns how many sockets were found (0: none, e.g. behind a proxy).
// Setting it on another client's socket to the same broker is harmless.
// Errors: "resolve_failed", "proc_unavailable".
Result<int> enable_tcp_nodelay_to_peer(const std::string& host, int port);

}  // namespace vend
