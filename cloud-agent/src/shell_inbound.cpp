#include "shell_inbound.hpp"

#include <string>

namespace vend::agent {

InboundPump::InboundPump(Limits limits, MessageHandler on_message, ConnectionHandler on_connection,
                         Logger& log)
    : limits_(limits),
      on_message_(std::move(on_message)),
      on_connection_(std::move(on_connection)),
      log_(log),
      thread_([this] { run(); }) {}

InboundPump::~InboundPump() { stop(); }

void InboundPump::push_message(const Message& message) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    if (messages_ >= limits_.max_messages || bytes_ + message.payload.size() > limits_.max_bytes) {
      ++dropped_;
      return;
    }
    ++messages_;
    bytes_ += message.payload.size();
    items_.emplace_back(message);
  }
  cv_.notify_one();
}

void InboundPump::push_connection(bool connected) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    items_.emplace_back(connected);
  }
  cv_.notify_one();
}

void InboundPump::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    items_.clear();
    messages_ = 0;
    bytes_ = 0;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

InboundPump::Fill InboundPump::fill() const {
  std::lock_guard lock(mu_);
  return Fill{messages_, limits_.max_messages, bytes_, limits_.max_bytes};
}

uint64_t InboundPump::dropped() const {
  std::lock_guard lock(mu_);
  return dropped_;
}

void InboundPump::run() {
  for (;;) {
    Item item;
    uint64_t dropped_now = 0;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return stopping_ || !items_.empty(); });
      if (stopping_) return;
      item = std::move(items_.front());
      items_.pop_front();
      if (auto* m = std::get_if<Message>(&item)) {
        --messages_;
        bytes_ -= m->payload.size();
      }
      dropped_now = dropped_;
    }
    report_drops(dropped_now);
    if (auto* m = std::get_if<Message>(&item)) {
      on_message_(*m);
    } else {
      on_connection_(std::get<bool>(item));
    }
  }
}

void InboundPump::report_drops(uint64_t dropped_now) {
  if (dropped_now == dropped_reported_) return;
  log_.warn("agent", "inbound MQTT queue full: dropped " +
                         std::to_string(dropped_now - dropped_reported_) +
                         " message(s) (devices re-send unacknowledged events)");
  dropped_reported_ = dropped_now;
}

}  // namespace vend::agent
