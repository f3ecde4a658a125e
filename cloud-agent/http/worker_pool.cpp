#include "http/worker_pool.hpp"

#include "vend/thread_name.hpp"

namespace vend::agent {

WorkerPool::WorkerPool(size_t threads, size_t max_queued)
    : max_queued_(max_queued == 0 ? 1 : max_queued) {
  for (size_t i = 0; i < (threads == 0 ? 1 : threads); ++i) {
    threads_.emplace_back([this] {
      name_this_thread("vend-http-work");
      work();
    });
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  has_work_.notify_all();
  for (auto& t : threads_) t.join();
}

bool WorkerPool::try_post(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    if (stopping_ || jobs_.size() >= max_queued_) return false;
    jobs_.push_back(std::move(job));
  }
  has_work_.notify_one();
  return true;
}

size_t WorkerPool::queued() const {
  std::lock_guard lock(mu_);
  return jobs_.size();
}

void WorkerPool::work() {
  for (;;) {
    std::function<void()> job;
    {
      std::unique_lock lock(mu_);
      has_work_.wait(lock, [this] { return !jobs_.empty() || stopping_; });
      if (jobs_.empty()) return;  // stopping and drained
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
  }
}

}  // namespace vend::agent
