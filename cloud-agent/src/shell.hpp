// The vend-agent process: the imperative shell around AgentCore. It owns
// every thread (HTTP workers, the ticker, the MQTT connector), the sockets,
// the signals and the Paho transport; the core owns the logic.
//
//   Paho threads         -> InboundPump (bounded queue) -> pump thread ->
//                           AgentCore::on_message / on_connection
//   HTTP worker threads  -> HttpApi -> AgentCore (thread-safe, one core lock)
//   ticker thread        -> AgentCore::tick() every 10 ms
//   main thread          -> waits for SIGTERM/SIGINT, then stops in order:
//                           HTTP, connector, pump, ticker, MQTT, repository.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace vend::agent {

// `args` excludes argv[0]. Returns the exit code: 0 after a clean stop (or
// --help), 1 when start-up fails (database, HTTP bind), 2 on bad options or
// secrets (the usage or the reason goes to `err`).
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace vend::agent
