// CoreRunner: where the agent core's steps run (the core's one thread).
//
// AgentCore holds no mutex. Every public AgentCore method runs its work as
// one or more steps through its runner; between two steps (never inside
// one) it may wait for a group commit on the caller's thread. In the
// vend-agent process the runner is the core thread (CoreThread: HTTP workers,
// MQTT callbacks and the refund sender hand their steps to its inbox and wait);
// single-threaded users (the deterministic simulation, unit tests) use
// InlineRunner and must then call the core from one thread only.
#pragma once

#include <deque>
#include <functional>

namespace vend::agent {

class CoreRunner {
 public:
  virtual ~CoreRunner() = default;
  // Runs `step` on the core's thread and returns once it has run: true.
  // False when the step was refused (the inbox is full, or the runner
  // stopped): it never runs, and the caller answers "unavailable". Called
  // from the core's thread itself, the step runs at once.
  virtual bool run(const std::function<void()>& step) = 0;
  // Queues `step` to run on the core's thread later and returns at once:
  // true, or false when refused (it never runs). Never runs it inside the
  // caller's frame on the core thread: a step may post the next one.
  virtual bool post(std::function<void()> step) = 0;
};

// Runs every step on the caller's thread: run() at once, post() at once
// too unless a step is running (then right after it, before run() returns).
class InlineRunner final : public CoreRunner {
 public:
  bool run(const std::function<void()>& step) override {
    bool outer = !running_;
    running_ = true;
    step();
    if (outer) {
      while (!posted_.empty()) {
        auto next = std::move(posted_.front());
        posted_.pop_front();
        next();
      }
      running_ = false;
    }
    return true;
  }
  bool post(std::function<void()> step) override {
    if (running_) {
      posted_.push_back(std::move(step));
      return true;
    }
    return run(step);
  }

 private:
  bool running_ = false;
  std::deque<std::function<void()>> posted_;
};

}  // namespace vend::agent
