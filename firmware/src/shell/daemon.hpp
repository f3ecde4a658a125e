// The vend-firmware daemon: the imperative shell around DeviceCore.
//
// One thread runs the core: it drains the Inbox (vend/inbox.hpp: commands and
// connection changes handed over by the Paho threads), calls
// DeviceCore::tick() every 20 ms and samples the hardware. A connector
// thread retries the first broker connection with backoff (afterwards the
// transport reconnects on its own) so that a slow or absent broker never
// delays a motor stop. SIGTERM/SIGINT: stop taking commands, let a running
// rotation (and the dispenses already accepted) finish within
// core.motor_timeout_ms, publish `offline`, disconnect, exit 0. A second
// signal exits at once.
#pragma once

#include <string>

#include "vend/log.hpp"

namespace vend::fw {

struct DaemonArgs {
  std::string config_path;
  LogLevel log_level = LogLevel::kInfo;
};

// Runs until a signal; returns the process exit code (setup.hpp).
int run_daemon(const DaemonArgs& args);

}  // namespace vend::fw
