// ReaderThread: where the agent core reads the log for clients' requests
// that memory cannot answer (AgentCore's readers): an order or an
// idempotency key not in memory (cluster mode, evicted orders). One thread,
// so the core's own reads wait behind one such read at most (the backends
// serialise their read connection), and two bounded lanes into it:
//   reservations  the idempotency keys of orders for machines the agent
//                 holds (bounded upstream by the machines' rate limits)
//   lookups       order ids of GET / cancel / review (anyone can send them)
// The reservations' lane is always served first, so a flood of look-ups
// never delays a customer's order. A read that does not fit its lane is
// refused (the request is answered 503) instead of piling up.
//
// Lifecycle: the thread starts in the constructor; stop() runs what is
// queued, refuses the rest and joins (the destructor stops it).
// Thread-safe. Non-copyable.
#pragma once

#include <array>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "core/core_runner.hpp"

namespace vend::agent {

class ReaderThread {
 public:
  // One lane: a CoreRunner whose steps run on the reader thread. run()
  // returns once its step ran (at once from the reader thread itself);
  // run() and post() return false when refused (lane full, or stopped).
  class Lane final : public CoreRunner {
   public:
    bool run(const std::function<void()>& step) override;
    bool post(std::function<void()> step) override;

   private:
    friend class ReaderThread;
    Lane(ReaderThread& owner, size_t index) : owner_(owner), index_(index) {}
    ReaderThread& owner_;
    size_t index_;
  };

  // `max_queued`: reads waiting per lane.
  explicit ReaderThread(size_t max_queued = 256);
  ~ReaderThread();
  ReaderThread(const ReaderThread&) = delete;
  ReaderThread& operator=(const ReaderThread&) = delete;

  CoreRunner& reservations() { return reservations_; }
  CoreRunner& lookups() { return lookups_; }
  void stop();  // idempotent

  uint64_t refused_total() const;

 private:
  bool post(size_t lane, std::function<void()> step);
  bool run(size_t lane, const std::function<void()>& step);
  void loop();

  const size_t max_queued_;
  Lane reservations_{*this, 0};
  Lane lookups_{*this, 1};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::array<std::deque<std::function<void()>>, 2> queues_;  // by lane; 0 first
  bool stopping_ = false;
  uint64_t refused_ = 0;
  std::thread thread_;  // last: starts once the rest is set
};

}  // namespace vend::agent
