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
};

// Runs every step at once on the caller's thread.
class InlineRunner final : public CoreRunner {
 public:
  bool run(const std::function<void()>& step) override {
    step();
    return true;
  }
};

}  // namespace vend::agent
