// The blocking order calls of tests, benchmarks and the simulation. Every
// answer reaches the caller as a posted step, so it arrives on the caller's
// thread after the steps queued before it (a payment's second step).
#include "core/order_calls.hpp"

#include <future>
#include <memory>
#include <optional>
#include <utility>

#include "repository/repository.hpp"

namespace vend::agent {

bool CallerRunner::run(const std::function<void()>& step) {
  if (running_) {
    step();
    return true;
  }
  pump();
  running_ = true;
  step();
  running_ = false;
  pump();
  return true;
}

bool CallerRunner::post(std::function<void()> step) {
  {
    std::lock_guard lock(mu_);
    posted_.push_back(std::move(step));
  }
  posted_cv_.notify_one();
  return true;
}

bool CallerRunner::pump() {
  if (running_) return false;
  bool ran = false;
  while (true) {
    std::function<void()> next;
    {
      std::lock_guard lock(mu_);
      if (posted_.empty()) return ran;
      next = std::move(posted_.front());
      posted_.pop_front();
    }
    running_ = true;
    next();
    running_ = false;
    ran = true;
  }
}

void CallerRunner::wait_posted() {
  std::unique_lock lock(mu_);
  posted_cv_.wait(lock, [this] { return !posted_.empty(); });
}

Result<Order> call_order(CallerRunner& runner, Repository& repo, const OrderCall& start,
                         const CrashAt& crash_at) {
  auto died = [] { return make_error("unavailable", "the agent died before answering"); };
  auto answer = std::make_shared<std::optional<Result<Order>>>();
  start([&runner, answer](Result<Order> r) {
    (void)runner.post([answer, r = std::move(r)]() mutable { *answer = std::move(r); });
  });
  while (true) {
    runner.pump();
    if (answer->has_value()) break;
    // Not answered: a commit is awaited (the reservation, or a payment's
    // first step). Its outcome posts the next step or the answer.
    repo.flush();
    if (crash_at && crash_at(CallPoint::kCommitted)) return died();
    runner.wait_posted();
  }
  if (crash_at && crash_at(CallPoint::kAnswered)) return died();
  return std::move(answer->value());
}

Result<Order> call_order(const OrderCall& start) {
  auto answer = std::make_shared<std::promise<Result<Order>>>();
  auto got = answer->get_future();
  start([answer](Result<Order> r) { answer->set_value(std::move(r)); });
  return got.get();
}

}  // namespace vend::agent
