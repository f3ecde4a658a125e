// Bounds for the agent's httplib::Server: a fixed pool of worker threads
// with a bounded queue of accepted connections, socket timeouts, and an
// exclusive listening port.
#pragma once

#include <httplib.h>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vend::agent {

struct HttpServerLimits {
  size_t threads = 8;            // requests handled at once
  size_t max_queued = 64;        // accepted connections waiting for a thread
  int read_timeout_s = 5;        // per read of a request
  int write_timeout_s = 5;       // per write of a response
  int keep_alive_timeout_s = 2;  // idle keep-alive connection
  size_t keep_alive_max_requests = 100;
  // Connections waiting for accept(). httplib listens with 5 (compiled into
  // Debian's library); a burst beyond it waits for a SYN retransmit, 1 s.
  int listen_backlog = 1024;
};

// httplib's TaskQueue with `threads` workers and at most `max_queued`
// waiting connections. When the queue is full, enqueue() blocks the accept
// loop until a worker frees a place: further clients wait in the kernel's
// listen backlog (and are refused beyond it) instead of growing memory.
// Thread-safe; shutdown() finishes queued work and joins the workers.
class BoundedTaskQueue final : public httplib::TaskQueue {
 public:
  BoundedTaskQueue(size_t threads, size_t max_queued);
  ~BoundedTaskQueue() override;
  BoundedTaskQueue(const BoundedTaskQueue&) = delete;
  BoundedTaskQueue& operator=(const BoundedTaskQueue&) = delete;

  void enqueue(std::function<void()> fn) override;
  void shutdown() override;

 private:
  void work();

  size_t max_queued_;
  std::mutex mu_;
  std::condition_variable has_work_;
  std::condition_variable has_room_;
  std::deque<std::function<void()>> jobs_;
  bool shutting_down_ = false;
  std::vector<std::thread> workers_;
};

// Applies `limits` to `server` (task queue, timeouts, keep-alive) and makes
// its listening socket exclusive: SO_REUSEADDR only. httplib's default adds
// SO_REUSEPORT on Linux, which lets a second agent bind the same port and
// silently receive half of the requests. When the server starts listening
// (listen_after_bind), the bound socket listens again with
// limits.listen_backlog (Linux updates a listening socket's backlog). Call
// before the server binds.
void configure_server(httplib::Server& server, const HttpServerLimits& limits);

}  // namespace vend::agent
