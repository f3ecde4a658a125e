// Helpers of the vendctl process tests: running the built binary, polling,
// matching table rows, and a real vend-agent on a real mosquitto.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace vend::ctl::testing {

using namespace std::chrono_literals;

inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

struct Run {
  int code = -1;
  std::string output;  // stdout + stderr
};

// Runs the built vendctl with `args` to completion (20 s at most); its
// output goes to a new file in `dir`.
inline Run vendctl(const test::TempDir& dir, const std::vector<std::string>& args) {
  static int n = 0;
  const std::string log = dir.file("vendctl-" + std::to_string(++n) + ".out");
  std::vector<std::string> argv{test::binary_path("vendctl/vendctl")};
  argv.insert(argv.end(), args.begin(), args.end());
  test::Child child(argv, log);
  const int code = child.wait(20s);
  return Run{code, test::read_file(log)};
}

inline bool has(const Run& r, const std::string& needle) {
  return r.output.find(needle) != std::string::npos;
}

// True when a line of `text` consists of exactly `words` ("*" matches any word).
inline bool has_row(const std::string& text, const std::vector<std::string>& words) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream in(line);
    std::vector<std::string> got;
    for (std::string w; in >> w;) got.push_back(w);
    bool same = got.size() == words.size();
    for (size_t i = 0; same && i < words.size(); ++i) same = words[i] == "*" || words[i] == got[i];
    if (same) return true;
  }
  return false;
}

// mosquitto + the real vend-agent (operator token in a file) in `dir`,
// serving HTTP with its MQTT session up. Not copyable.
class RealAgent {
 public:
  static constexpr const char* kToken = "ctl-test-operator-token-0123456789";

  explicit RealAgent(const test::TempDir& dir) : dir_(dir), http_port_(test::free_port()) {
    test::write_private_file(dir.file("operator.token"), std::string(kToken) + "\n");
    agent_ = std::make_unique<test::Child>(
        std::vector<std::string>{test::binary_path("cloud-agent/vend-agent"), "--http",
                                 "127.0.0.1:" + std::to_string(http_port_), "--mqtt", broker_.url(),
                                 "--db", dir.file("agent.db"), "--operator-token-file",
                                 dir.file("operator.token"), "--gateway-secret-file",
                                 dir.file("gateway.secret")},
        dir.file("agent.log"));
    started_ = eventually([&] { return log().find("HTTP API on") != std::string::npos; }, 10s);
  }
  RealAgent(const RealAgent&) = delete;
  RealAgent& operator=(const RealAgent&) = delete;

  bool started() const { return started_; }
  std::string log() const { return test::read_file(dir_.file("agent.log")); }
  std::string api() const { return "http://127.0.0.1:" + std::to_string(http_port_); }
  int http_port() const { return http_port_; }
  const test::MosquittoServer& broker() const { return broker_; }
  // vendctl `args` with --api and --token-file of this agent.
  Run ctl(std::vector<std::string> args) const {
    for (const std::string& a :
         {std::string("--api"), api(), std::string("--token-file"), dir_.file("operator.token")}) {
      args.push_back(a);
    }
    return vendctl(dir_, args);
  }

 private:
  const test::TempDir& dir_;
  test::MosquittoServer broker_;
  int http_port_;
  std::unique_ptr<test::Child> agent_;
  bool started_ = false;
};

}  // namespace vend::ctl::testing
