#include "shell/core_thread.hpp"

#include <future>
#include <string>
#include <variant>

#include "vend/thread_name.hpp"
#include "vend/topics.hpp"

namespace vend::agent {

using Steady = std::chrono::steady_clock;

CoreThread::CoreThread(Limits limits, std::chrono::milliseconds tick_period, Logger& log)
    : inbox_(limits), tick_period_(tick_period), log_(log) {}

CoreThread::~CoreThread() { stop(); }

void CoreThread::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  thread_ = std::thread([this] { loop(); });
  started_ = true;
}

void CoreThread::stop() {
  if (stopped_.exchange(true)) return;
  inbox_.close();
  if (thread_.joinable()) thread_.join();
}

bool CoreThread::on_core_thread() const {
  return !started_ || std::this_thread::get_id() == thread_.get_id();
}

bool CoreThread::run(const std::function<void()>& step) {
  if (on_core_thread()) {
    if (stopped_ && started_) return false;
    step();
    return true;
  }
  std::promise<void> done;
  std::future<void> ran = done.get_future();
  // The step runs before run() returns, so the reference stays valid.
  if (!inbox_.push_call([&step, &done] {
        step();
        done.set_value();
      })) {
    return false;
  }
  ran.wait();
  return true;
}

bool CoreThread::post(std::function<void()> step) {
  if (!started_) {  // start-up: one thread, nothing runs yet
    step();
    return true;
  }
  return inbox_.push_call(std::move(step));
}

void CoreThread::push_message(const Message& message) {
  // Each machine's share of the queue is bounded: its device id is the
  // source (a topic of no device counts as its own source).
  auto device = topics::parse_device_topic(message.topic);
  std::string_view source = device.ok() ? std::string_view(device->device) : message.topic;
  (void)inbox_.push_message(message, message.topic.size() + message.payload.size(), source);
}

void CoreThread::push_connection(bool connected) { inbox_.push_connection(connected); }

void CoreThread::loop() {
  name_this_thread("vend-core");
  Steady::time_point next_tick = Steady::now() + tick_period_;
  const auto idle = std::chrono::hours(1);
  Inbox<Message>::Batch batch;  // reused: no allocation per batch
  for (;;) {
    auto deadline = tick_period_.count() > 0 ? next_tick : Steady::now() + idle;
    inbox_.take_until(deadline, batch);
    for (bool up : batch.connection_changes) {
      if (handlers_.on_connection) handlers_.on_connection(up);
    }
    if (batch.dropped_since_last > 0) {
      log_.warn("agent", "inbound queue full: dropped " + std::to_string(batch.dropped_since_last) +
                             " MQTT message(s) (devices re-send unacknowledged events)");
    }
    for (auto& item : batch.items) {
      if (auto* m = std::get_if<Message>(&item)) {
        if (handlers_.on_message) handlers_.on_message(*m);
      } else {
        std::get<Inbox<Message>::Call>(item)();
      }
    }
    batch.items.clear();       // what the steps captured is released now; the capacity stays
    if (batch.closed) return;  // everything queued before close() has run
    Steady::time_point now = Steady::now();
    if (tick_period_.count() > 0 && now >= next_tick) {
      if (handlers_.on_tick) handlers_.on_tick();
      // Late ticks are not caught up in a burst: the next one is a period away.
      next_tick = std::max(next_tick + tick_period_, now);
    }
  }
}

}  // namespace vend::agent
