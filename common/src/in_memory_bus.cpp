#include "vend/in_memory_bus.hpp"

#include <algorithm>
#include <utility>

namespace vend {

namespace {

constexpr size_t kMaxTopicBytes = 65535;

// Next '/'-separated level of `s` starting at `pos`; sets `pos` to npos after
// the last level.
std::string_view next_level(std::string_view s, size_t& pos) {
  size_t end = s.find('/', pos);
  std::string_view level = end == std::string_view::npos ? s.substr(pos) : s.substr(pos, end - pos);
  pos = end == std::string_view::npos ? std::string_view::npos : end + 1;
  return level;
}

bool valid_qos(int qos) { return qos >= 0 && qos <= 2; }

bool has_wildcard(std::string_view filter) {
  return filter.find_first_of("+#") != std::string_view::npos;
}

}  // namespace

// ---- topic rules -----------------------------------------------------------

bool InMemoryBus::is_valid_topic_name(std::string_view topic) {
  return !topic.empty() && topic.size() <= kMaxTopicBytes &&
         topic.find_first_of(std::string_view("+#\0", 3)) == std::string_view::npos;
}

bool InMemoryBus::is_valid_topic_filter(std::string_view filter) {
  if (filter.empty() || filter.size() > kMaxTopicBytes) return false;
  if (filter.find('\0') != std::string_view::npos) return false;
  size_t pos = 0;
  while (pos != std::string_view::npos) {
    std::string_view level = next_level(filter, pos);
    bool has_hash = level.find('#') != std::string_view::npos;
    bool has_plus = level.find('+') != std::string_view::npos;
    if (has_hash && (level != "#" || pos != std::string_view::npos)) return false;
    if (has_plus && level != "+") return false;
  }
  return true;
}

bool InMemoryBus::topic_matches(std::string_view filter, std::string_view topic) {
  // A leading wildcard never matches a '$' topic (MQTT 3.1.1 4.7.2).
  if (!topic.empty() && topic[0] == '$' && (filter[0] == '+' || filter[0] == '#')) return false;
  size_t fpos = 0;
  size_t tpos = 0;
  for (;;) {
    std::string_view flevel = next_level(filter, fpos);
    if (flevel == "#") return true;  // also matches the parent level ("a/#" ~ "a")
    if (tpos == std::string_view::npos) return false;
    std::string_view tlevel = next_level(topic, tpos);
    if (flevel != "+" && flevel != tlevel) return false;
    if (fpos == std::string_view::npos) return tpos == std::string_view::npos;
  }
}

// ---- bus lifetime ----------------------------------------------------------

InMemoryBus::InMemoryBus(Limits limits) : limits_(limits) {}

InMemoryBus::~InMemoryBus() {
  for (InMemoryClient* client : clients_) client->bus_ = nullptr;
}

std::unique_ptr<InMemoryClient> InMemoryBus::make_client(const std::string& client_id,
                                                         std::optional<Will> will,
                                                         bool clean_session) {
  std::unique_ptr<InMemoryClient> client(
      new InMemoryClient(this, client_id, std::move(will), clean_session));
  clients_.insert(client.get());
  return client;
}

void InMemoryBus::forget_client(InMemoryClient* client) {
  auto it = endpoints_.find(client->client_id_);
  if (it != endpoints_.end() && it->second.client == client) {
    if (it->second.online) end_connection(it->second, /*publish_will=*/false, /*notify=*/false);
    it->second.client = nullptr;
  }
  clients_.erase(client);
}

// ---- connections -----------------------------------------------------------

bool InMemoryBus::is_online(const InMemoryClient* client) const {
  auto it = endpoints_.find(client->client_id_);
  return it != endpoints_.end() && it->second.online && it->second.client == client;
}

bool InMemoryBus::is_connected(const std::string& client_id) const {
  auto it = endpoints_.find(client_id);
  return it != endpoints_.end() && it->second.online;
}

InMemoryBus::Endpoint& InMemoryBus::endpoint_of(const std::string& client_id) {
  auto [it, made] = endpoints_.try_emplace(client_id);
  if (made) it->second.id = client_id;
  return it->second;
}

Status InMemoryBus::connect_client(InMemoryClient* client) {
  Endpoint& endpoint = endpoint_of(client->client_id_);
  if (endpoint.partitioned) {
    return make_error("unreachable", "client '" + client->client_id_ + "' is partitioned");
  }
  if (endpoint.online && endpoint.client == client) return {};
  take_over(endpoint, client);
  if (client->clean_session_) clear_session(endpoint);
  client->last_session_present_ = endpoint.session;
  endpoint.client = client;
  endpoint.online = true;
  endpoint.session = true;
  endpoint.clean = client->clean_session_;
  restore_subscriptions(endpoint, client->client_id_, *client);
  // Messages queued for the session while offline, oldest first.
  std::deque<Envelope> backlog;
  backlog.swap(endpoint.offline_queue);
  for (Envelope& envelope : backlog) enqueue(Pending{std::move(envelope), false});
  if (client->connection_handler_) {
    Transport::ConnectionHandler handler = client->connection_handler_;
    handler(true);
  }
  return {};
}

// MQTT session takeover: a second connection with the same id ends the first
// one (the old client is told; no will, as the session lives on).
void InMemoryBus::take_over(Endpoint& endpoint, InMemoryClient* client) {
  if (!endpoint.online || endpoint.client == client) return;
  InMemoryClient* old = endpoint.client;
  endpoint.online = false;
  if (endpoint.clean) clear_session(endpoint);
  if (old != nullptr && old->connection_handler_) {
    Transport::ConnectionHandler handler = old->connection_handler_;
    handler(false);
  }
}

void InMemoryBus::clear_session(Endpoint& endpoint) {
  endpoint.session = false;
  while (!endpoint.subscriptions.empty()) {
    drop_subscription(endpoint, endpoint.subscriptions.begin()->first);
  }
  endpoint.offline_queue.clear();
}

void InMemoryBus::set_subscription(Endpoint& endpoint, const std::string& filter, int qos) {
  endpoint.subscriptions[filter] = qos;
  auto& index = has_wildcard(filter) ? wildcard_subscribers_[filter] : exact_subscribers_[filter];
  index.insert(endpoint.id);
}

void InMemoryBus::drop_subscription(Endpoint& endpoint, const std::string& filter) {
  // `filter` may be the key erased below: the index is updated first.
  if (endpoint.subscriptions.count(filter) == 0) return;
  auto drop = [&](auto& index) {
    auto it = index.find(filter);
    if (it == index.end()) return;
    it->second.erase(endpoint.id);
    if (it->second.empty()) index.erase(it);
  };
  if (has_wildcard(filter)) {
    drop(wildcard_subscribers_);
  } else {
    drop(exact_subscribers_);
  }
  endpoint.subscriptions.erase(filter);
}

void InMemoryBus::restore_subscriptions(Endpoint& endpoint, const std::string& client_id,
                                        const InMemoryClient& client) {
  for (const auto& [filter, qos] : client.subscriptions_) {
    auto it = endpoint.subscriptions.find(filter);
    if (it == endpoint.subscriptions.end() || it->second != qos) {
      subscribe_endpoint(endpoint, client_id, filter, qos);
    }
  }
}

void InMemoryBus::disconnect_client(InMemoryClient* client) {
  auto it = endpoints_.find(client->client_id_);
  if (it == endpoints_.end() || !it->second.online || it->second.client != client) return;
  end_connection(it->second, /*publish_will=*/false, /*notify=*/false);
}

void InMemoryBus::end_connection(Endpoint& endpoint, bool publish_will, bool notify) {
  endpoint.online = false;
  InMemoryClient* client = endpoint.client;
  if (endpoint.clean) clear_session(endpoint);
  if (client == nullptr) return;
  // Copies: the handler may destroy the client.
  std::optional<Will> will = client->will_;
  std::string client_id = client->client_id_;
  if (notify && client->connection_handler_) {
    Transport::ConnectionHandler handler = client->connection_handler_;
    handler(false);
  }
  if (publish_will && will) {
    ++stats_.wills_published;
    route(client_id, Message{will->topic, will->payload, will->qos, will->retained});
  }
}

void InMemoryBus::disconnect(const std::string& client_id, bool publish_will) {
  auto it = endpoints_.find(client_id);
  if (it == endpoints_.end() || !it->second.online) return;
  end_connection(it->second, publish_will, /*notify=*/true);
}

void InMemoryBus::kill_client(const std::string& client_id) {
  auto it = endpoints_.find(client_id);
  if (it == endpoints_.end() || !it->second.online) return;
  end_connection(it->second, /*publish_will=*/true, /*notify=*/false);
}

bool InMemoryBus::reconnect(const std::string& client_id) {
  auto it = endpoints_.find(client_id);
  if (it == endpoints_.end() || it->second.online || it->second.client == nullptr) return false;
  return connect_client(it->second.client).ok();
}

void InMemoryBus::partition(const std::string& client_id, bool partitioned) {
  endpoint_of(client_id).partitioned = partitioned;
}

// ---- publish and subscribe -------------------------------------------------

Status InMemoryBus::publish_from(InMemoryClient* client, const Message& message) {
  if (!is_online(client)) return make_error("not_connected", "client is not connected");
  if (!is_valid_topic_name(message.topic)) {
    return make_error("bad_topic", "invalid topic name '" + message.topic + "'");
  }
  if (!valid_qos(message.qos)) {
    return make_error("bad_qos", "qos " + std::to_string(message.qos) + " is not 0, 1 or 2");
  }
  if (pending() >= limits_.max_pending) {
    ++stats_.dropped_overflow;
    return make_error("queue_full", "bus pending queue holds " + std::to_string(pending()));
  }
  if (endpoint_of(client->client_id_).partitioned) {
    ++stats_.dropped_partition;  // lost on the wire; the client cannot tell
    return {};
  }
  route(client->client_id_, message);
  return {};
}

void InMemoryBus::add_subscription(InMemoryClient* client, const std::string& filter, int qos) {
  if (!is_online(client)) return;  // applied at the next connect
  Endpoint& endpoint = endpoint_of(client->client_id_);
  subscribe_endpoint(endpoint, client->client_id_, filter, qos);
}

void InMemoryBus::remove_subscription(InMemoryClient* client, const std::string& filter) {
  // From the session too, connected or not (a persistent one keeps it).
  auto it = endpoints_.find(client->client_id_);
  if (it != endpoints_.end() && it->second.client == client) drop_subscription(it->second, filter);
}

void InMemoryBus::subscribe_endpoint(Endpoint& endpoint, const std::string& client_id,
                                     const std::string& filter, int qos) {
  set_subscription(endpoint, filter, qos);
  auto send_retained = [&](const Message& message) {
    Message copy = message;
    copy.qos = std::min(copy.qos, qos);
    copy.retained = true;
    enqueue(Pending{Envelope{client_id, "", std::move(copy)}, false});
  };
  if (!has_wildcard(filter)) {  // one topic: no scan of every retained one
    if (auto it = retained_.find(filter); it != retained_.end()) send_retained(it->second);
    return;
  }
  for (const auto& [topic, message] : retained_) {
    if (topic_matches(filter, topic)) send_retained(message);
  }
}

void InMemoryBus::route(const std::string& from, const Message& message) {
  ++stats_.published;
  if (message.retained) {
    if (message.payload.empty()) {
      retained_.erase(message.topic);
    } else {
      retained_[message.topic] = message;
    }
  }
  // Client id -> the highest QoS of its matching filters, in client id order.
  std::map<std::string, int> to;
  auto add = [&](const std::string& filter, const std::set<std::string>& ids) {
    for (const std::string& id : ids) {
      int qos = endpoints_.at(id).subscriptions.at(filter);
      auto [it, made] = to.try_emplace(id, qos);
      if (!made) it->second = std::max(it->second, qos);
    }
  };
  if (auto it = exact_subscribers_.find(message.topic); it != exact_subscribers_.end()) {
    add(it->first, it->second);
  }
  for (const auto& [filter, ids] : wildcard_subscribers_) {
    if (topic_matches(filter, message.topic)) add(filter, ids);
  }
  for (const auto& [client_id, best_qos] : to) {
    Endpoint& endpoint = endpoints_.at(client_id);
    if (!endpoint.session) continue;
    Message copy = message;
    copy.qos = std::min(message.qos, best_qos);
    copy.retained = false;
    route_to(endpoint, Envelope{client_id, from, std::move(copy)});
  }
}

void InMemoryBus::route_to(Endpoint& endpoint, Envelope envelope) {
  if (endpoint.online) {
    enqueue(Pending{std::move(envelope), false});
  } else {
    queue_offline(endpoint, std::move(envelope));
  }
}

void InMemoryBus::queue_offline(Endpoint& endpoint, Envelope envelope) {
  if (!endpoint.session || endpoint.clean || envelope.message.qos == 0) {
    ++stats_.dropped_offline;
  } else if (endpoint.offline_queue.size() >= limits_.max_session_queue) {
    ++stats_.dropped_overflow;
  } else {
    endpoint.offline_queue.push_back(std::move(envelope));
  }
}

void InMemoryBus::enqueue(Pending pending) {
  if (this->pending() >= limits_.max_pending) {
    ++stats_.dropped_overflow;
    return;
  }
  queue_.push_back(std::move(pending));
}

// ---- delivery --------------------------------------------------------------

bool InMemoryBus::deliver_one() {
  if (pending() == 0) return false;
  ++step_;
  release_due_delayed();
  if (queue_.empty()) return true;  // only delayed deliveries: time moved on
  Pending pending = std::move(queue_.front());
  queue_.pop_front();
  if (!pending.filtered && filter_) {
    apply_fault(std::move(pending));
  } else {
    deliver_to_client(pending.envelope);
  }
  return true;
}

size_t InMemoryBus::deliver_all(size_t max_steps) {
  size_t steps = 0;
  while (steps < max_steps && deliver_one()) ++steps;
  return steps;
}

void InMemoryBus::apply_fault(Pending pending) {
  Fault fault = filter_(pending.envelope);
  pending.filtered = true;
  switch (fault.action) {
    case Fault::Action::kDeliver: deliver_to_client(pending.envelope); break;
    case Fault::Action::kDrop: ++stats_.dropped_filter; break;
    case Fault::Action::kDuplicate:
      ++stats_.duplicated;
      enqueue(pending);
      deliver_to_client(pending.envelope);
      break;
    case Fault::Action::kDelay:
      ++stats_.delayed;
      delayed_.emplace(step_ + fault.delay_steps, std::move(pending));
      break;
  }
}

void InMemoryBus::release_due_delayed() {
  while (!delayed_.empty() && delayed_.begin()->first <= step_) {
    queue_.push_back(std::move(delayed_.begin()->second));
    delayed_.erase(delayed_.begin());
  }
}

void InMemoryBus::deliver_to_client(const Envelope& envelope) {
  Endpoint& endpoint = endpoint_of(envelope.to);
  if (!endpoint.online || endpoint.client == nullptr) {
    queue_offline(endpoint, envelope);  // went offline while it was pending
    return;
  }
  if (endpoint.partitioned) {
    ++stats_.dropped_partition;
    return;
  }
  ++stats_.delivered;
  if (endpoint.client->message_handler_) {
    Transport::MessageHandler handler = endpoint.client->message_handler_;
    handler(envelope.message);
  }
}

void InMemoryBus::reorder(Random& random) {
  for (size_t i = queue_.size(); i > 1; --i) {
    size_t j = static_cast<size_t>(random.range(0, static_cast<int64_t>(i) - 1));
    std::swap(queue_[i - 1], queue_[j]);
  }
}

std::vector<InMemoryBus::Envelope> InMemoryBus::pending_snapshot() const {
  std::vector<Envelope> out;
  out.reserve(queue_.size());
  for (const Pending& pending : queue_) out.push_back(pending.envelope);
  return out;
}

std::optional<Message> InMemoryBus::retained(const std::string& topic) const {
  auto it = retained_.find(topic);
  if (it == retained_.end()) return std::nullopt;
  return it->second;
}

// ---- InMemoryClient --------------------------------------------------------

InMemoryClient::InMemoryClient(InMemoryBus* bus, std::string client_id, std::optional<Will> will,
                               bool clean_session)
    : bus_(bus),
      client_id_(std::move(client_id)),
      will_(std::move(will)),
      clean_session_(clean_session) {}

InMemoryClient::~InMemoryClient() {
  if (bus_ != nullptr) bus_->forget_client(this);
}

Status InMemoryClient::connect() {
  if (bus_ == nullptr) return make_error("not_connected", "the bus is gone");
  return bus_->connect_client(this);
}

void InMemoryClient::disconnect() {
  if (bus_ != nullptr) bus_->disconnect_client(this);
}

bool InMemoryClient::connected() const { return bus_ != nullptr && bus_->is_online(this); }

Status InMemoryClient::publish(const Message& message) {
  if (bus_ == nullptr) return make_error("not_connected", "the bus is gone");
  return bus_->publish_from(this, message);
}

Status InMemoryClient::subscribe(const std::string& topic_filter, int qos) {
  if (bus_ == nullptr) return make_error("not_connected", "the bus is gone");
  if (!InMemoryBus::is_valid_topic_filter(topic_filter)) {
    return make_error("bad_topic_filter", "invalid topic filter '" + topic_filter + "'");
  }
  if (!valid_qos(qos)) return make_error("bad_qos", "qos " + std::to_string(qos));
  subscriptions_[topic_filter] = qos;
  bus_->add_subscription(this, topic_filter, qos);
  return {};
}

Status InMemoryClient::unsubscribe(const std::string& topic_filter) {
  if (bus_ == nullptr) return make_error("not_connected", "the bus is gone");
  subscriptions_.erase(topic_filter);
  bus_->remove_subscription(this, topic_filter);
  return {};
}

}  // namespace vend
