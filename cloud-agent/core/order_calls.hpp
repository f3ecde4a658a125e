// Blocking order calls over AgentCore's asynchronous ones. There is one way
// into the core for reservations and payments, create_order_async and
// pay_async (answered after the commit; a payment's second step runs after
// its first commit), the way the HTTP API calls it; tests, benchmarks and
// the deterministic simulation drive that same path to its answer here.
//
// CallerRunner: a CoreRunner whose steps all run on one caller's thread.
// run() runs the queued steps, then its own; post() only queues (from any
// thread: the repository's writer hands commit outcomes back through it),
// and what is queued runs at the caller's next run() or pump(). So the
// caller decides when a posted step runs: the deterministic simulation can
// kill the agent between a commit and the step that follows it.
//
// Thread-safety: post() from any thread; run(), pump() and wait_posted()
// from the caller's thread only. Non-copyable.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

#include "core/agent_core.hpp"
#include "core/core_runner.hpp"

namespace vend::agent {

class Repository;

class CallerRunner final : public CoreRunner {
 public:
  CallerRunner() = default;
  CallerRunner(const CallerRunner&) = delete;
  CallerRunner& operator=(const CallerRunner&) = delete;

  // Runs what is queued, `step`, then what it queued. Inside a step it runs
  // `step` at once. Never refuses.
  bool run(const std::function<void()>& step) override;
  // Queues `step`; never refuses. Unbounded: its callers (tests, benchmarks,
  // the simulation) drive one call at a time to its answer, so it holds a
  // few steps at most.
  bool post(std::function<void()> step) override;
  // Runs the queued steps, and those they queue, until none is left; true
  // when one ran. No-op inside a step.
  bool pump();
  // Blocks until a step is queued.
  void wait_posted();

 private:
  std::mutex mu_;
  std::condition_variable posted_cv_;
  std::deque<std::function<void()>> posted_;  // guarded by mu_
  bool running_ = false;                      // the caller's thread only
};

// Starts one asynchronous call: `start(done)` calls create_order_async or
// pay_async with `done`.
using OrderCall = std::function<void(AgentCore::OrderCallback done)>;

// Where call_order stops to let the deterministic simulation kill the agent.
enum class CallPoint {
  kCommitted,  // the call's writes are committed; its next step (a
               // payment's dispense) or its answer is queued, not run yet
  kAnswered,   // the answer exists; the caller has not received it
};
// Asked at each CallPoint: true when the agent process died there (its
// core, runner and repository are gone).
using CrashAt = std::function<bool(CallPoint)>;

// Drives `start` to its answer on the caller's thread, for a core whose
// runner is `runner`: runs its steps, commits `repo`'s queue between them
// (Repository::flush: with manual_commit this is the only commit), and
// returns the answer `done` got. When `crash_at` reports a death the call
// returns "unavailable" at once, touching neither `runner` nor `repo`: the
// caller never received an answer.
Result<Order> call_order(CallerRunner& runner, Repository& repo, const OrderCall& start,
                         const CrashAt& crash_at = {});

// For a core on a threaded runner (CoreThread): waits for the answer.
Result<Order> call_order(const OrderCall& start);

}  // namespace vend::agent
