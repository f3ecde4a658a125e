// WorkerPool: a fixed number of threads running jobs from a bounded queue.
// The Router runs every route but the customers' order and payment here (they
// wait for AgentCore: a step on the core thread, an operator call's group
// commit) so that the HTTP event threads never wait.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vend::agent {

// Non-copyable. Thread-safe. The destructor finishes every queued job and
// joins the threads.
class WorkerPool {
 public:
  // At least one thread and one queued job.
  WorkerPool(size_t threads, size_t max_queued);
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool();

  // Queues `job`; false (and `job` not run) when max_queued jobs wait already
  // or the pool is stopping.
  bool try_post(std::function<void()> job);
  size_t queued() const;

 private:
  void work();

  size_t max_queued_;
  mutable std::mutex mu_;
  std::condition_variable has_work_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace vend::agent
