// Fake motor lines for the motor guard, in memory shared across fork(): the
// test process reads what a line does after the process that drove it (or
// the one that owns it) is killed, like reading a gpio-sim line's level.
// Each write is stamped with monotonic_ns.
#pragma once

#include <sys/mman.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <memory>
#include <new>
#include <stdexcept>
#include <thread>
#include <vector>

#include "gpio/timed_motor.hpp"
#include "motor_guard/motor_guard.hpp"

namespace vend::fw::test {

class SharedLines {
 public:
  struct State {
    std::atomic<int> level{0};
    std::atomic<int> writes{0};
    std::atomic<int64_t> on_ns{0};   // last write of 1
    std::atomic<int64_t> off_ns{0};  // last write of 0
    std::atomic<int> fail{0};        // writes fail with EIO while set
  };
  static_assert(std::atomic<int>::is_always_lock_free);

  explicit SharedLines(size_t count) : count_(count) {
    void* p = mmap(nullptr, bytes(), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::runtime_error("mmap failed");
    states_ = static_cast<State*>(p);
    for (size_t i = 0; i < count; ++i) {
      new (&states_[i]) State();
      lines_.push_back(std::make_unique<Line>(states_[i]));
      guard_lines_.push_back(lines_.back().get());
    }
  }
  ~SharedLines() { munmap(states_, bytes()); }
  SharedLines(const SharedLines&) = delete;
  SharedLines& operator=(const SharedLines&) = delete;

  const std::vector<GuardLine*>& guard_lines() const { return guard_lines_; }
  State& at(size_t i) { return states_[i]; }
  bool level(size_t i) const { return states_[i].level.load() != 0; }

  // Waits until line i reads `level`; false when it did not within `limit`.
  bool wait_level(size_t i, bool level, std::chrono::milliseconds limit) const {
    auto until = std::chrono::steady_clock::now() + limit;
    while (this->level(i) != level) {
      if (std::chrono::steady_clock::now() >= until) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
  }

 private:
  class Line final : public GuardLine {
   public:
    explicit Line(State& s) : s_(s) {}
    bool set(bool active) noexcept override {
      if (s_.fail.load() != 0) {
        errno = EIO;
        return false;
      }
      (active ? s_.on_ns : s_.off_ns).store(monotonic_ns());
      s_.level.store(active ? 1 : 0);
      s_.writes.fetch_add(1);
      return true;
    }

   private:
    State& s_;
  };

  size_t bytes() const { return sizeof(State) * (count_ == 0 ? 1 : count_); }

  size_t count_;
  State* states_ = nullptr;
  std::vector<std::unique_ptr<Line>> lines_;
  std::vector<GuardLine*> guard_lines_;
};

}  // namespace vend::fw::test
