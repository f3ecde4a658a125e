#include "shell/inbound_queue.hpp"

namespace vend::fw {

bool InboundQueue::push_command(std::string payload) {
  {
    std::lock_guard lock(mu_);
    if (commands_.size() >= capacity_) {
      ++dropped_total_;
      return false;
    }
    commands_.push_back(std::move(payload));
  }
  cv_.notify_one();
  return true;
}

void InboundQueue::push_connection(bool connected) {
  {
    std::lock_guard lock(mu_);
    latest_connection_ = connected;
    if (!connected) lost_since_take_ = true;
  }
  cv_.notify_one();
}

void InboundQueue::wake() {
  {
    std::lock_guard lock(mu_);
    woken_ = true;
  }
  cv_.notify_one();
}

bool InboundQueue::has_work_locked() const {
  return woken_ || latest_connection_.has_value() || !commands_.empty() ||
         dropped_total_ != dropped_reported_;
}

InboundQueue::Batch InboundQueue::take_until(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  cv_.wait_until(lock, deadline, [this] { return has_work_locked(); });
  Batch batch;
  // A loss the consumer has not seen comes first, even if the session is
  // already back: the core must restart its drain from the acked seq.
  if (lost_since_take_ && delivered_connected_) {
    batch.connection_changes.push_back(false);
    delivered_connected_ = false;
  }
  if (latest_connection_ && *latest_connection_ != delivered_connected_) {
    batch.connection_changes.push_back(*latest_connection_);
    delivered_connected_ = *latest_connection_;
  }
  latest_connection_.reset();
  lost_since_take_ = false;
  batch.commands.assign(std::make_move_iterator(commands_.begin()),
                        std::make_move_iterator(commands_.end()));
  commands_.clear();
  batch.dropped_since_last = dropped_total_ - dropped_reported_;
  dropped_reported_ = dropped_total_;
  woken_ = false;
  return batch;
}

uint64_t InboundQueue::dropped_total() const {
  std::lock_guard lock(mu_);
  return dropped_total_;
}

}  // namespace vend::fw
