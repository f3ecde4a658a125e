// Small helpers of the end-to-end tests that drive real binaries: polling
// with a deadline, and trimming what a file or a process printed.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <thread>

namespace vend::agent::test_rig {

// Calls `done` every 50 ms until it holds (true) or `timeout` passes (false).
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

// `s` without its trailing newlines and spaces.
inline std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace vend::agent::test_rig
