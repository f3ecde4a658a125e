// OpsHub: the ops events (vend/ops.hpp: fleet, device, orders, alerts,
// reconcile) as Server-Sent Events for the console (GET /v1/ops/stream,
// docs/openapi.yaml). OpsTee hands it every message the core publishes on
// vend/v1/ops/..., on the core thread, so the stream carries exactly what
// the ops topics carry, in the same order.
//
// The core thread never waits on a subscriber: publish() formats the frame
// once, then for each subscriber appends a shared pointer to its bounded
// queue under that subscriber's own short lock and wakes its connection.
// A subscriber whose queue is full loses its oldest frames; its next read
// starts with a `resync` event ({"v":1,"dropped":n}: refetch the state),
// counted in resyncs_total. At most max_subscribers at once: subscribe()
// beyond fails "unavailable" (503). Each stream begins with a `hello`
// event and carries a comment line every heartbeat_ms without events, so
// proxies keep the connection.
//
// Frames: "id: <n>\nevent: <kind>\ndata: <the ops JSON>\n\n", kind one of
// fleet, device, orders, alert, reconcile; <n> counts the hub's events.
// Besides: `hello` ({"v":1,"heartbeat_ms","queue_events","broker_connected"})
// first, and `agent` ({"v":1,"broker_connected":b}) whenever the agent's
// broker connection goes down or up, so the console never shows a live
// fleet while the agent hears nothing from it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "http/http_server.hpp"
#include "vend/result.hpp"
#include "vend/transport.hpp"

namespace vend::agent {

struct OpsHubOptions {
  size_t max_subscribers = 64;
  size_t queue_events = 256;         // per subscriber
  size_t queue_bytes = 1024 * 1024;  // per subscriber
  int64_t heartbeat_ms = 15'000;
};

struct OpsHubStats {
  uint64_t subscribers = 0;
  uint64_t events_total = 0;   // published to the hub
  uint64_t dropped_total = 0;  // frames dropped from full queues
  uint64_t resyncs_total = 0;  // resync events sent
  uint64_t refused_total = 0;  // subscriptions refused (max_subscribers)
};

// The SSE kind of an ops topic ("fleet", "device", ...); "" if not one.
std::string ops_event_kind(const std::string& topic);

class OpsSubscriber;

// Thread-safe. Non-copyable. Subscribers may outlive it (they keep a
// reference to the shared state only).
class OpsHub {
 public:
  // `clock`'s monotonic time paces heartbeats; it must outlive the hub and
  // every subscriber.
  OpsHub(OpsHubOptions options, const Clock& clock);
  OpsHub(const OpsHub&) = delete;
  OpsHub& operator=(const OpsHub&) = delete;

  // One ops message (any thread; the core thread in the agent). Not an ops
  // topic: ignored. Also passed to every listener (OpsSeries).
  void publish(const Message& message);
  // A listener that sees every ops message, on the publishing thread; it
  // MUST be O(1) and never block. Add before publishing starts.
  void add_listener(std::function<void(const std::string& kind, const std::string& payload)> l);

  // The agent's broker connection went up or down (any thread; the
  // transport's): an `agent` event to every stream when it changed. Down
  // until first called.
  void set_broker_connected(bool connected);

  // A new stream; "unavailable" beyond max_subscribers.
  Result<std::shared_ptr<HttpStreamSource>> subscribe();

  OpsHubStats stats() const;
  // Prometheus text: vend_ops_stream_subscribers, vend_ops_stream_events_total,
  // vend_ops_stream_dropped_total, vend_ops_stream_resyncs_total,
  // vend_ops_stream_refused_total.
  std::string render_metrics() const;

  struct Shared;  // what subscribers keep (ops_stream.cpp)

 private:
  std::shared_ptr<Shared> shared_;
  std::vector<std::function<void(const std::string&, const std::string&)>> listeners_;
};

// A Transport that forwards everything to `inner` and hands each published
// ops message to `hub` too. Both must outlive it.
class OpsTee final : public Transport {
 public:
  OpsTee(Transport& inner, OpsHub& hub) : inner_(inner), hub_(hub) {}
  void on_message(MessageHandler handler) override { inner_.on_message(std::move(handler)); }
  void on_connection(ConnectionHandler handler) override {
    inner_.on_connection(std::move(handler));
  }
  Status connect() override { return inner_.connect(); }
  void disconnect() override { inner_.disconnect(); }
  bool connected() const override { return inner_.connected(); }
  Status publish(const Message& message) override;
  Status subscribe(const std::string& topic_filter, int qos) override {
    return inner_.subscribe(topic_filter, qos);
  }
  Status subscribe_many(const std::vector<std::string>& topic_filters, int qos) override {
    return inner_.subscribe_many(topic_filters, qos);
  }
  Status unsubscribe(const std::string& topic_filter) override {
    return inner_.unsubscribe(topic_filter);
  }

 private:
  Transport& inner_;
  OpsHub& hub_;
};

}  // namespace vend::agent
