#include "shell/reader_thread.hpp"

#include <future>

#include "vend/thread_name.hpp"

namespace vend::agent {

bool ReaderThread::Lane::run(const std::function<void()>& step) { return owner_.run(index_, step); }

bool ReaderThread::Lane::post(std::function<void()> step) {
  return owner_.post(index_, std::move(step));
}

ReaderThread::ReaderThread(size_t max_queued)
    : max_queued_(max_queued), thread_([this] { loop(); }) {}

ReaderThread::~ReaderThread() { stop(); }

void ReaderThread::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable() && std::this_thread::get_id() != thread_.get_id()) thread_.join();
}

uint64_t ReaderThread::refused_total() const {
  std::lock_guard lock(mu_);
  return refused_;
}

bool ReaderThread::post(size_t lane, std::function<void()> step) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || queues_[lane].size() >= max_queued_) {
      ++refused_;
      return false;
    }
    queues_[lane].push_back(std::move(step));
  }
  cv_.notify_one();
  return true;
}

bool ReaderThread::run(size_t lane, const std::function<void()>& step) {
  if (std::this_thread::get_id() == thread_.get_id()) {
    step();
    return true;
  }
  std::promise<void> done;
  std::future<void> ran = done.get_future();
  // The step runs before run() returns, so the references stay valid.
  if (!post(lane, [&step, &done] {
        step();
        done.set_value();
      })) {
    return false;
  }
  ran.wait();
  return true;
}

void ReaderThread::loop() {
  name_this_thread("vend-reader");
  auto waiting = [this] { return !queues_[0].empty() || !queues_[1].empty(); };
  for (;;) {
    std::function<void()> step;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || waiting(); });
      if (!waiting()) return;  // stopping, and everything queued has run
      auto& queue = queues_[0].empty() ? queues_[1] : queues_[0];
      step = std::move(queue.front());
      queue.pop_front();
    }
    step();
  }
}

}  // namespace vend::agent
