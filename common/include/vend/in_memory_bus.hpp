// InMemoryBus: a deterministic, single-threaded MQTT broker in memory, for
// unit tests and the deterministic simulator.
//
// MQTT 3.1.1 semantics that matter to the cores:
//   - topic filters with '+' and '#' ('$'-topics are not matched by a leading
//     wildcard), one copy per client at the highest matching QoS;
//   - retained messages (an empty retained payload clears the topic), sent to
//     new subscriptions with retained = true; live copies have retained = false;
//   - persistent sessions (clean_session = false): subscriptions survive a
//     disconnect and QoS >= 1 messages are queued while the client is offline,
//     then delivered after it reconnects; clean sessions are discarded when
//     the connection ends;
//   - the last will is published when the connection ends without a clean
//     disconnect (kill_client, disconnect), never on InMemoryClient::disconnect().
//
// Delivery is NOT immediate: publish() routes the message into a pending
// queue, and the caller drives delivery with deliver_one() / deliver_all() on
// its own thread, so the simulator controls every interleaving. Connection
// events (on_connection) are synchronous: they run inside connect(),
// disconnect(id), reconnect(id).
//
// Faults, all driven by the caller and deterministic: a per-delivery filter
// (DELIVER / DROP / DUPLICATE / DELAY n steps), reorder() of the pending queue
// with a given Random, disconnect(id) (connection lost), kill_client(id)
// (process death), reconnect(id), partition(id, on).
//
// Bounds: the pending queue (including delayed deliveries) holds at most
// Limits::max_pending entries and each offline session at most
// Limits::max_session_queue messages. On overflow the message is dropped and
// counted in Stats::dropped_overflow; a client publish() that finds the
// pending queue full fails with "queue_full".
//
// Thread-safety: none. A bus and all its clients belong to one thread.
// Handlers run on that thread, inside deliver_one() and the connection calls;
// they may call back into the bus (publish, subscribe, even destroy clients).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "vend/random.hpp"
#include "vend/transport.hpp"

namespace vend {

class InMemoryClient;

class InMemoryBus {
 public:
  struct Limits {
    size_t max_pending = 1'000'000;      // queued + delayed deliveries
    size_t max_session_queue = 100'000;  // per offline persistent session
  };

  // One delivery, as the fault filter and pending_snapshot() see it.
  struct Envelope {
    std::string to;    // receiving client id
    std::string from;  // publishing client id (the dead client for a will)
    Message message;
  };

  // What the fault filter decides for one delivery. The filter is asked once
  // per delivery: copies made by DUPLICATE and deliveries released after a
  // DELAY are not filtered again.
  struct Fault {
    enum class Action { kDeliver, kDrop, kDuplicate, kDelay };
    Action action = Action::kDeliver;
    uint64_t delay_steps = 0;

    static Fault deliver() { return {}; }
    static Fault drop() { return {Action::kDrop, 0}; }
    // Delivers now and appends a second copy at the back of the queue.
    static Fault duplicate() { return {Action::kDuplicate, 0}; }
    // Holds the delivery for `steps` deliver_one() calls, then appends it at
    // the back of the queue.
    static Fault delay(uint64_t steps) { return {Action::kDelay, steps}; }
  };
  using FaultFilter = std::function<Fault(const Envelope&)>;

  struct Stats {
    uint64_t published = 0;          // accepted publishes, wills included
    uint64_t delivered = 0;          // messages handed to a client
    uint64_t dropped_filter = 0;     // Fault::drop()
    uint64_t duplicated = 0;         // Fault::duplicate()
    uint64_t delayed = 0;            // Fault::delay()
    uint64_t dropped_partition = 0;  // to or from a partitioned client
    uint64_t dropped_offline = 0;    // QoS 0 or clean session while offline
    uint64_t dropped_overflow = 0;   // pending or session queue full
    uint64_t wills_published = 0;
  };

  explicit InMemoryBus(Limits limits);
  InMemoryBus() : InMemoryBus(Limits{}) {}
  // Clients still alive are detached: afterwards they report not_connected.
  ~InMemoryBus();
  InMemoryBus(const InMemoryBus&) = delete;
  InMemoryBus& operator=(const InMemoryBus&) = delete;

  // A new, not yet connected client. The bus must outlive it or be destroyed
  // first (the client then fails every call). Several client objects may use
  // one id: the one that connects takes the session over (MQTT takeover).
  std::unique_ptr<InMemoryClient> make_client(const std::string& client_id,
                                              std::optional<Will> will = std::nullopt,
                                              bool clean_session = false);

  // Delivery. One step = one deliver_one() call: it releases due delayed
  // deliveries, then delivers (or faults) the first pending one. Returns
  // false when nothing is pending (queued or delayed).
  bool deliver_one();
  // Steps until nothing is pending or `max_steps` steps ran; returns steps run.
  size_t deliver_all(size_t max_steps = 10'000'000);
  // Queued plus delayed deliveries.
  size_t pending() const { return queue_.size() + delayed_.size(); }
  // The queued deliveries in order (delayed ones excluded).
  std::vector<Envelope> pending_snapshot() const;

  // Faults.
  void set_filter(FaultFilter filter) { filter_ = std::move(filter); }
  // Shuffles the queued deliveries (Fisher-Yates driven by `random`).
  void reorder(Random& random);
  // Connection lost (network): the client gets on_connection(false), its will
  // is published when `publish_will`, a persistent session keeps queueing.
  // No-op when the client is not connected.
  void disconnect(const std::string& client_id, bool publish_will = true);
  // Process death: like disconnect() but the client is not told (it is dead).
  void kill_client(const std::string& client_id);
  // The client that last connected with this id connects again, as Paho's
  // automatic reconnect would. Returns false when there is no such client,
  // it is partitioned, or it is already connected.
  bool reconnect(const std::string& client_id);
  // While partitioned, a connected client still believes it is connected, but
  // everything it publishes and everything delivered to it is silently lost
  // (counted in dropped_partition), and connect() fails with "unreachable".
  // Combine with disconnect() to model a keep-alive timeout.
  void partition(const std::string& client_id, bool partitioned);

  // Inspection.
  const Stats& stats() const { return stats_; }
  uint64_t delivered_count() const { return stats_.delivered; }
  bool is_connected(const std::string& client_id) const;
  // The retained message of a topic, if any.
  std::optional<Message> retained(const std::string& topic) const;

  // MQTT topic rules (3.1.1 section 4.7).
  static bool is_valid_topic_name(std::string_view topic);
  static bool is_valid_topic_filter(std::string_view filter);
  // REQUIRES: is_valid_topic_filter(filter) and is_valid_topic_name(topic).
  static bool topic_matches(std::string_view filter, std::string_view topic);

 private:
  friend class InMemoryClient;

  struct Endpoint {
    std::string id;                    // its client id
    InMemoryClient* client = nullptr;  // the client object that connected last
    bool online = false;
    bool partitioned = false;
    bool session = false;                      // the broker holds session state for this id
    bool clean = false;                        // the current/last connection used a clean session
    std::map<std::string, int> subscriptions;  // filter -> QoS
    std::deque<Envelope> offline_queue;
  };
  struct Pending {
    Envelope envelope;
    bool filtered = false;
  };

  // Called by InMemoryClient.
  Status connect_client(InMemoryClient* client);
  void disconnect_client(InMemoryClient* client);
  void forget_client(InMemoryClient* client);
  Status publish_from(InMemoryClient* client, const Message& message);
  void add_subscription(InMemoryClient* client, const std::string& filter, int qos);
  void remove_subscription(InMemoryClient* client, const std::string& filter);
  bool is_online(const InMemoryClient* client) const;

  // The endpoint of `client_id`, made on first use.
  Endpoint& endpoint_of(const std::string& client_id);
  void take_over(Endpoint& endpoint, InMemoryClient* client);
  void clear_session(Endpoint& endpoint);
  // Every change to an endpoint's subscriptions goes through these two, so
  // the index below stays the subscriptions' inverse.
  void set_subscription(Endpoint& endpoint, const std::string& filter, int qos);
  void drop_subscription(Endpoint& endpoint, const std::string& filter);
  void restore_subscriptions(Endpoint& endpoint, const std::string& client_id,
                             const InMemoryClient& client);
  void subscribe_endpoint(Endpoint& endpoint, const std::string& client_id,
                          const std::string& filter, int qos);
  void end_connection(Endpoint& endpoint, bool publish_will, bool notify);
  void route(const std::string& from, const Message& message);
  void route_to(Endpoint& endpoint, Envelope envelope);
  void enqueue(Pending pending);
  void apply_fault(Pending pending);
  void deliver_to_client(const Envelope& envelope);
  void queue_offline(Endpoint& endpoint, Envelope envelope);
  void release_due_delayed();

  Limits limits_;
  Stats stats_;
  FaultFilter filter_;
  std::map<std::string, Endpoint> endpoints_;  // ordered: deterministic fan-out
  // Who subscribes to each filter: a topic's subscribers are found without
  // looking at every subscription (a fleet of thousands of machines has one
  // exact filter per machine and topic, and a handful of wildcard ones).
  // Client ids in order, so the fan-out order stays that of endpoints_.
  std::unordered_map<std::string, std::set<std::string>> exact_subscribers_;
  std::map<std::string, std::set<std::string>> wildcard_subscribers_;
  std::map<std::string, Message> retained_;
  std::deque<Pending> queue_;
  std::multimap<uint64_t, Pending> delayed_;  // due step -> delivery (FIFO per step)
  uint64_t step_ = 0;
  std::set<InMemoryClient*> clients_;  // every live client, to detach on destruction
};

// A Transport bound to an InMemoryBus. Non-copyable. Same thread as its bus.
//
// subscribe() is remembered by the client and (re)applied whenever it
// connects to a session that does not hold it; subscribing while disconnected
// succeeds and takes effect at the next connect. disconnect() is a clean
// MQTT DISCONNECT: no will, no on_connection(false). Destroying a connected
// client ends its connection like disconnect() (no will).
class InMemoryClient final : public Transport {
 public:
  ~InMemoryClient() override;
  InMemoryClient(const InMemoryClient&) = delete;
  InMemoryClient& operator=(const InMemoryClient&) = delete;

  void on_message(MessageHandler handler) override { message_handler_ = std::move(handler); }
  void on_connection(ConnectionHandler handler) override {
    connection_handler_ = std::move(handler);
  }
  // Errors: "not_connected" (bus gone), "unreachable" (partitioned).
  Status connect() override;
  void disconnect() override;
  bool connected() const override;
  // Errors: "not_connected", "bad_topic", "bad_qos", "queue_full".
  Status publish(const Message& message) override;
  // Errors: "bad_topic_filter", "bad_qos", "not_connected" (bus gone).
  Status subscribe(const std::string& topic_filter, int qos = 1) override;
  Status unsubscribe(const std::string& topic_filter) override;

  // Test hooks.
  const std::string& client_id() const { return client_id_; }
  // Whether the broker held a session for this id at the last connect().
  bool last_session_present() const { return last_session_present_; }

 private:
  friend class InMemoryBus;
  InMemoryClient(InMemoryBus* bus, std::string client_id, std::optional<Will> will,
                 bool clean_session);

  InMemoryBus* bus_;  // null once the bus is destroyed
  std::string client_id_;
  std::optional<Will> will_;
  bool clean_session_;
  bool last_session_present_ = false;
  std::map<std::string, int> subscriptions_;  // remembered: filter -> QoS
  MessageHandler message_handler_;
  ConnectionHandler connection_handler_;
};

}  // namespace vend
