// OpsHub: SSE frames of the ops messages, fanned out to bounded
// per-subscriber queues (ops_stream.hpp).
#include "http/ops_stream.hpp"

#include <algorithm>

#include "vend/prometheus_text.hpp"
#include "vend/topics.hpp"

namespace vend::agent {

namespace {

constexpr std::string_view kOpsPrefix = "vend/v1/ops/";

// "event: <kind>" and the payload as data lines (a newline in the payload
// starts another data line, so the client's parser joins them back).
std::string sse_frame(uint64_t id, const std::string& kind, const std::string& payload) {
  std::string frame = "id: " + std::to_string(id) + "\nevent: " + kind + "\ndata: ";
  frame.reserve(frame.size() + payload.size() + 2);
  for (char c : payload) {
    if (c == '\r') continue;
    frame += c;
    if (c == '\n') frame += "data: ";
  }
  frame += "\n\n";
  return frame;
}

}  // namespace

std::string ops_event_kind(const std::string& topic) {
  if (topic.rfind(kOpsPrefix, 0) != 0) return "";
  std::string_view rest = std::string_view(topic).substr(kOpsPrefix.size());
  if (rest == "fleet") return "fleet";
  if (rest == "orders") return "orders";
  if (rest == "alerts") return "alert";
  if (rest.rfind("devices/", 0) == 0) return "device";
  if (rest.rfind("reconcile/", 0) == 0) return "reconcile";
  return "";
}

struct OpsHub::Shared {
  Shared(OpsHubOptions o, const Clock& c) : options(o), clock(c) {}
  const OpsHubOptions options;
  const Clock& clock;
  // Guards subscribers, next_id and broker_connected; taken before a
  // subscriber's own lock, never inside it.
  std::mutex mu;
  std::vector<std::shared_ptr<OpsSubscriber>> subscribers;
  uint64_t next_id = 1;
  bool broker_connected = false;
  std::atomic<uint64_t> events{0}, dropped{0}, resyncs{0}, refused{0};

  void remove(const OpsSubscriber* sub);
};

// One stream: a bounded queue of frames, read by the event thread.
class OpsSubscriber final : public HttpStreamSource {
 public:
  explicit OpsSubscriber(std::shared_ptr<OpsHub::Shared> hub)
      : hub_(std::move(hub)), last_sent_mono_ms_(hub_->clock.monotonic_ms()) {}

  void push(std::shared_ptr<const std::string> frame) {
    {
      std::lock_guard lock(mu_);
      if (closed_) return;
      bytes_ += frame->size();
      queue_.push_back(std::move(frame));
      const OpsHubOptions& o = hub_->options;
      while (queue_.size() > 1 && (queue_.size() > o.queue_events || bytes_ > o.queue_bytes)) {
        bytes_ -= queue_.front()->size();
        queue_.pop_front();
        ++lost_;
        ++hub_->dropped;
      }
    }
    wake();
  }

  Read read(std::string& out, size_t max) override {
    std::lock_guard lock(mu_);
    if (!partial_.empty()) return take_partial(out, max);
    if (lost_ > 0) {
      out = "event: resync\ndata: {\"v\":1,\"dropped\":" + std::to_string(lost_) + "}\n\n";
      lost_ = 0;
      ++hub_->resyncs;
    }
    while (!queue_.empty() && out.size() + queue_.front()->size() <= max) {
      out += *queue_.front();
      bytes_ -= queue_.front()->size();
      queue_.pop_front();
    }
    if (out.empty() && !queue_.empty()) {  // a frame larger than one read
      partial_ = *queue_.front();
      bytes_ -= queue_.front()->size();
      queue_.pop_front();
      return take_partial(out, max);
    }
    if (out.empty() && heartbeat_due_) out = ": keep-alive\n\n";
    heartbeat_due_ = false;
    if (out.empty()) return Read::kEmpty;
    last_sent_mono_ms_ = hub_->clock.monotonic_ms();
    return Read::kData;
  }

  void tick(int64_t now_mono_ms) override {
    {
      std::lock_guard lock(mu_);
      if (closed_ || heartbeat_due_ ||
          now_mono_ms - last_sent_mono_ms_ < hub_->options.heartbeat_ms) {
        return;
      }
      heartbeat_due_ = true;
      last_sent_mono_ms_ = now_mono_ms;
    }
    wake();
  }

  void on_close() override {
    {
      std::lock_guard lock(mu_);
      closed_ = true;
      queue_.clear();
    }
    hub_->remove(this);
  }

 private:
  Read take_partial(std::string& out, size_t max) {
    size_t n = std::min(max, partial_.size());
    out.assign(partial_, 0, n);
    partial_.erase(0, n);
    last_sent_mono_ms_ = hub_->clock.monotonic_ms();
    return Read::kData;
  }

  std::shared_ptr<OpsHub::Shared> hub_;
  std::mutex mu_;  // guards everything below
  std::deque<std::shared_ptr<const std::string>> queue_;
  size_t bytes_ = 0;
  uint64_t lost_ = 0;    // frames dropped since the last resync
  std::string partial_;  // the rest of a frame being sent
  int64_t last_sent_mono_ms_ = 0;
  bool heartbeat_due_ = false;
  bool closed_ = false;
};

void OpsHub::Shared::remove(const OpsSubscriber* sub) {
  std::lock_guard lock(mu);
  std::erase_if(subscribers, [sub](const auto& s) { return s.get() == sub; });
}

OpsHub::OpsHub(OpsHubOptions options, const Clock& clock)
    : shared_(std::make_shared<Shared>(options, clock)) {}

void OpsHub::add_listener(
    std::function<void(const std::string& kind, const std::string& payload)> l) {
  listeners_.push_back(std::move(l));
}

void OpsHub::publish(const Message& message) {
  std::string kind = ops_event_kind(message.topic);
  if (kind.empty()) return;
  for (const auto& l : listeners_) l(kind, message.payload);
  std::vector<std::shared_ptr<OpsSubscriber>> subs;
  uint64_t id = 0;
  {
    std::lock_guard lock(shared_->mu);
    id = shared_->next_id++;
    subs = shared_->subscribers;
  }
  ++shared_->events;
  if (subs.empty()) return;
  auto frame = std::make_shared<const std::string>(sse_frame(id, kind, message.payload));
  for (const auto& s : subs) s->push(frame);
}

void OpsHub::set_broker_connected(bool connected) {
  std::lock_guard lock(shared_->mu);  // held while pushing: no stream sees the changes reordered
  if (shared_->broker_connected == connected) return;
  shared_->broker_connected = connected;
  auto frame = std::make_shared<const std::string>(
      std::string("event: agent\ndata: {\"v\":1,\"broker_connected\":") +
      (connected ? "true" : "false") + "}\n\n");
  for (const auto& s : shared_->subscribers) s->push(frame);
}

Result<std::shared_ptr<HttpStreamSource>> OpsHub::subscribe() {
  auto sub = std::make_shared<OpsSubscriber>(shared_);
  std::lock_guard lock(shared_->mu);  // the hello's broker state stays current until queued
  if (shared_->subscribers.size() >= shared_->options.max_subscribers) {
    ++shared_->refused;
    return make_error("unavailable", "too many event streams open (at most " +
                                         std::to_string(shared_->options.max_subscribers) + ")");
  }
  shared_->subscribers.push_back(sub);
  sub->push(std::make_shared<const std::string>(
      "event: hello\ndata: {\"v\":1,\"heartbeat_ms\":" +
      std::to_string(shared_->options.heartbeat_ms) +
      ",\"queue_events\":" + std::to_string(shared_->options.queue_events) +
      ",\"broker_connected\":" + (shared_->broker_connected ? "true" : "false") + "}\n\n"));
  return std::shared_ptr<HttpStreamSource>(std::move(sub));
}

OpsHubStats OpsHub::stats() const {
  OpsHubStats s;
  {
    std::lock_guard lock(shared_->mu);
    s.subscribers = shared_->subscribers.size();
  }
  s.events_total = shared_->events.load();
  s.dropped_total = shared_->dropped.load();
  s.resyncs_total = shared_->resyncs.load();
  s.refused_total = shared_->refused.load();
  return s;
}

std::string OpsHub::render_metrics() const {
  OpsHubStats s = stats();
  PrometheusText text;
  text.scalar("vend_ops_stream_subscribers", MetricType::kGauge, "console event streams open now",
              s.subscribers);
  text.scalar("vend_ops_stream_events_total", MetricType::kCounter,
              "ops events handed to the event streams", s.events_total);
  text.scalar("vend_ops_stream_dropped_total", MetricType::kCounter,
              "events dropped from a slow event stream's full queue", s.dropped_total);
  text.scalar("vend_ops_stream_resyncs_total", MetricType::kCounter,
              "resync events sent to slow event streams", s.resyncs_total);
  text.scalar("vend_ops_stream_refused_total", MetricType::kCounter,
              "event streams refused beyond the subscriber cap", s.refused_total);
  return text.take();
}

Status OpsTee::publish(const Message& message) {
  hub_.publish(message);
  return inner_.publish(message);
}

}  // namespace vend::agent
