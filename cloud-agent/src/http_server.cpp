#include "http_server.hpp"

#include <sys/socket.h>

#include <atomic>
#include <memory>

namespace vend::agent {

BoundedTaskQueue::BoundedTaskQueue(size_t threads, size_t max_queued)
    : max_queued_(max_queued == 0 ? 1 : max_queued) {
  for (size_t i = 0; i < (threads == 0 ? 1 : threads); ++i) {
    workers_.emplace_back([this] { work(); });
  }
}

BoundedTaskQueue::~BoundedTaskQueue() { shutdown(); }

void BoundedTaskQueue::enqueue(std::function<void()> fn) {
  {
    std::unique_lock lock(mu_);
    has_room_.wait(lock, [this] { return jobs_.size() < max_queued_ || shutting_down_; });
    // After shutdown the job still runs: it owns an accepted socket that
    // only the job closes.
    jobs_.push_back(std::move(fn));
  }
  has_work_.notify_one();
}

void BoundedTaskQueue::shutdown() {
  {
    std::lock_guard lock(mu_);
    if (shutting_down_ && workers_.empty()) return;
    shutting_down_ = true;
  }
  has_work_.notify_all();
  has_room_.notify_all();
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  std::deque<std::function<void()>> late;
  {
    std::lock_guard lock(mu_);
    workers_.clear();
    late.swap(jobs_);
  }
  // A job enqueued after the workers left (a race with shutdown) runs here.
  for (auto& fn : late) fn();
}

void BoundedTaskQueue::work() {
  for (;;) {
    std::function<void()> fn;
    {
      std::unique_lock lock(mu_);
      has_work_.wait(lock, [this] { return !jobs_.empty() || shutting_down_; });
      if (jobs_.empty()) return;  // shutting down and drained
      fn = std::move(jobs_.front());
      jobs_.pop_front();
    }
    has_room_.notify_one();
    fn();
  }
}

void configure_server(httplib::Server& server, const HttpServerLimits& limits) {
  size_t threads = limits.threads;
  size_t max_queued = limits.max_queued;
  int backlog = limits.listen_backlog;
  auto listen_fd = std::make_shared<std::atomic<socket_t>>(INVALID_SOCKET);
  // httplib makes the task queue once it is bound and about to accept: the
  // moment to widen its backlog of 5 (docs/benchmarks.md #2).
  server.new_task_queue = [threads, max_queued, backlog, listen_fd] {
    if (socket_t fd = listen_fd->load(); fd != INVALID_SOCKET) (void)::listen(fd, backlog);
    return new BoundedTaskQueue(threads, max_queued);
  };
  server.set_read_timeout(limits.read_timeout_s, 0);
  server.set_write_timeout(limits.write_timeout_s, 0);
  server.set_keep_alive_timeout(limits.keep_alive_timeout_s);
  server.set_keep_alive_max_count(limits.keep_alive_max_requests);
  // Without it, a response written in two parts (headers, body) waits for the
  // client's delayed ACK: ~40 ms per request (docs/benchmarks.md #2). The
  // accepted sockets inherit it from the listening one.
  server.set_tcp_nodelay(true);
  server.set_socket_options([listen_fd](socket_t sock) {
    int yes = 1;  // restart at once despite TIME_WAIT, but never share the port
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    listen_fd->store(sock);  // the listening socket (the server makes no other)
  });
}

}  // namespace vend::agent
