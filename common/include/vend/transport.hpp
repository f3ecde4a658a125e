// Transport: the small MQTT-shaped interface the cores talk through.
// Implementations: PahoTransport (vend_mqtt, real broker) and InMemoryBus
// clients (deterministic simulation and unit tests).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "vend/result.hpp"

namespace vend {

struct Message {
  std::string topic;
  std::string payload;
  int qos = 1;
  bool retained = false;
};

// The last will a broker publishes when the client vanishes without a clean
// disconnect.
struct Will {
  std::string topic;
  std::string payload;
  int qos = 1;
  bool retained = true;
};

// Callbacks may run on a transport thread (Paho) or on the caller's thread
// (InMemoryBus). A core that is single-threaded hands them over through one
// bounded queue in its shell (CONVENTIONS.md #4).
class Transport {
 public:
  using MessageHandler = std::function<void(const Message&)>;
  // Called with true when a session is up (first connect and every
  // reconnect), false when it is lost.
  using ConnectionHandler = std::function<void(bool connected)>;

  virtual ~Transport() = default;

  // Set handlers before connect().
  virtual void on_message(MessageHandler handler) = 0;
  virtual void on_connection(ConnectionHandler handler) = 0;

  // Starts the session. Returns an error if the first connection attempt
  // fails; after that, reconnects happen on their own.
  virtual Status connect() = 0;
  virtual void disconnect() = 0;
  virtual bool connected() const = 0;

  // Fails fast with "not_connected" or "queue_full" instead of blocking.
  virtual Status publish(const Message& message) = 0;
  // Subscriptions are remembered and restored after a reconnect.
  virtual Status subscribe(const std::string& topic_filter, int qos = 1) = 0;
  // Subscribes to every one of `filters`, each remembered as by subscribe(),
  // without a round trip to the broker per filter: a transport that can
  // sends them together and waits once for all the answers. The default
  // calls subscribe() for each (and returns its first error).
  virtual Status subscribe_many(const std::vector<std::string>& topic_filters, int qos = 1) {
    Status first;
    for (const auto& filter : topic_filters) {
      if (Status s = subscribe(filter, qos); !s.ok() && first.ok()) first = s;
    }
    return first;
  }
  // Forgets a subscription (and tells the broker, when connected). A
  // transport that cannot refuses it ("unsupported").
  virtual Status unsubscribe(const std::string& topic_filter) {
    return make_error("unsupported", "this transport cannot unsubscribe '" + topic_filter + "'");
  }
};

}  // namespace vend
