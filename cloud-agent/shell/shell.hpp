// The vend-agent process: the imperative shell around AgentCore. It owns
// every thread (the core thread, the HTTP server's event threads and
// workers, the MQTT connector, the refund sender, the cluster node's), the
// sockets, the signals and the Paho transport; the core owns the logic and
// runs on the core thread only.
//
//   Paho threads         -> CoreThread's inbox (bounded) -> core thread ->
//                           AgentCore::on_message / on_connection
//   HTTP event threads   -> HttpApi: POST /v1/orders (on a worker with
//                           --redis) and .../payment post a step to the core
//                           thread, answered from the commit callback
//   HTTP worker threads  -> HttpApi: every other route; operator calls
//                           wait on the worker for their commit
//   core thread          -> AgentCore::tick() every 10 ms between batches
//   core thread          -> OpsTee: every ops message also to the console's
//                           event stream (OpsHub) and plots (OpsSeries)
//   main thread          -> parses the plots' messages (OpsSeries::drain)
//                           every 200 ms; waits for SIGTERM/SIGINT, then stops in order:
//                           HTTP, connector, refunds, core thread, MQTT,
//                           repository, cluster node.
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
