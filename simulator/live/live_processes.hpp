// Child processes of a live run started with --launch: mosquitto and
// vend-agent on free loopback ports, their output in log files of the work
// dir. Every child is stopped (SIGTERM, then SIGKILL) when its object goes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "vend/result.hpp"

namespace vend::sim {

// A child process. Non-copyable.
class ChildProcess {
 public:
  // Starts argv with stdout and stderr appended to `log_path`.
  static Result<std::unique_ptr<ChildProcess>> start(const std::vector<std::string>& argv,
                                                     const std::string& log_path);
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // SIGTERM, wait up to `grace`, then SIGKILL. Returns the exit status
  // (128 + signal when killed by one). Idempotent.
  int stop(std::chrono::milliseconds grace = std::chrono::milliseconds(5000));
  bool running();
  pid_t pid() const { return pid_; }

 private:
  explicit ChildProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  bool reaped_ = false;
  int status_ = -1;
};

// A TCP port of 127.0.0.1 that was free a moment ago.
Result<int> free_loopback_port();
// True once 127.0.0.1:port accepts connections.
bool wait_for_port(int port, std::chrono::milliseconds timeout);
// `name` if it contains '/', else the first match on PATH, /usr/sbin, /usr/bin.
Result<std::string> find_program(const std::string& name);
// The directory of the running executable (for vend-agent next to vend-sim).
std::string self_dir();

// What --launch started.
struct LaunchedServices {
  std::unique_ptr<ChildProcess> mosquitto;
  std::unique_ptr<ChildProcess> agent;
  int mqtt_port = 0;
  int http_port = 0;
  std::vector<std::string> agent_argv;  // to restart it
  std::string agent_log;
};

// Starts mosquitto (config written to `dir`) and waits for its port.
Status launch_broker(const std::string& dir, const std::string& mosquitto_bin,
                     LaunchedServices& out);
// Starts vend-agent with its database and secrets in `dir`, and waits until
// its HTTP API answers /healthz.
Status launch_agent(const std::string& dir, const std::string& agent_bin, int64_t reservation_ttl_s,
                    int64_t dispatch_ttl_s, LaunchedServices& out);
// Starts the agent again with the same arguments (agent-restart fault).
Status restart_agent(LaunchedServices& services);

}  // namespace vend::sim
