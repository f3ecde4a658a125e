// The rig of the system benchmarks (docs/benchmarks.md #2, #3, #4): the real
// servers on loopback and a fleet of virtual machines around them.
//
//   AgentServer   mosquitto + the real vend-agent binary as child processes
//                 (temp dir, free ports, secrets); SIGTERM on stop.
//   Fleet         in-process machines: the real firmware core, the simulated
//                 HAL (motor time configurable, 0 = instant), a ledger file
//                 and a Paho client each (vend-sim's LiveMachine), stepped by
//                 a few threads; provisioned and restocked over the HTTP API.
//   HttpCustomer  one keep-alive HTTP client (not thread-safe: one per thread)
//                 that orders and pays (payments signed as the gateway does).
//
// Everything here fails loudly: set-up errors are returned as Status, and a
// bench turns them into a non-zero exit.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"
#include "vend/log.hpp"
#include "vend/result.hpp"

namespace httplib {
class Client;
}

namespace vend::sim {
class LiveMachine;
}

namespace vend::bench {

// What a Fleet needs of the agent side: where to provision (an agent's HTTP
// port: with several agents any one, the client follows redirects), the
// broker, the secrets and a directory for the ledgers. `wait_online`: wait
// until the agent's /v1/devices shows every machine online (one agent); with
// several, each knows only its own machines, so the Fleet waits for every
// machine's own MQTT session instead.
struct FleetTarget {
  int http_port = 0;
  std::string broker_url;
  std::string operator_token;
  std::string gateway_secret;
  std::string ledger_dir;
  bool wait_online = true;
  std::vector<int> more_ports;  // the other agents: provisioning and fills retry there on 503
};

// mosquitto and vend-agent on free loopback ports, files in a temp dir.
// Non-copyable; stops both on destruction.
class AgentServer {
 public:
  // Starts both and waits until the agent answers /healthz with MQTT up.
  // `agent_args` are appended to the agent's command line (--sync, ...).
  static Result<std::unique_ptr<AgentServer>> start(const std::vector<std::string>& agent_args);
  ~AgentServer();
  AgentServer(const AgentServer&) = delete;
  AgentServer& operator=(const AgentServer&) = delete;

  int http_port() const { return http_port_; }
  std::string broker_url() const { return broker_.url(); }
  const std::string& operator_token() const { return operator_token_; }
  const std::string& gateway_secret() const { return gateway_secret_; }
  pid_t agent_pid() const { return agent_->pid(); }
  const test::TempDir& dir() const { return dir_; }
  // The agent's /metrics text ("" when unreachable).
  std::string metrics() const;
  FleetTarget target() const;
  // SIGTERM to the agent; its exit code (-1: had to be killed).
  int stop_agent();

 private:
  AgentServer() = default;
  test::TempDir dir_;
  test::MosquittoServer broker_;
  std::unique_ptr<test::Child> agent_;
  int http_port_ = 0;
  std::string operator_token_, gateway_secret_;
};

struct FleetSpec {
  std::string prefix = "bm";  // machine ids: prefix-001, ...
  int machines = 1;
  int slots = 1;
  int capacity = 100;        // per slot (1..1000)
  int64_t motor_run_ms = 0;  // simulated rotation; 0 = instant
  int step_threads = 1;      // threads stepping the cores
  int64_t tick_us = 1000;    // pause between two rounds of steps
};

// Non-copyable. Stops every machine (offline published) on destruction.
class Fleet {
 public:
  // Provisions every machine over HTTP, boots and connects it, starts the
  // stepping threads and waits until the agent sees all of them online.
  static Result<std::unique_ptr<Fleet>> start(const FleetSpec& spec, const AgentServer& server,
                                              Logger& log);
  static Result<std::unique_ptr<Fleet>> start(const FleetSpec& spec, FleetTarget target,
                                              Logger& log);
  ~Fleet();
  Fleet(const Fleet&) = delete;
  Fleet& operator=(const Fleet&) = delete;

  // Restocks every slot with `count` items (auto-confirmed at the machine)
  // and waits until every pool holds at least `count` tokens.
  Status fill(int count, std::chrono::seconds timeout);
  // While paused the cores are not stepped: commands wait (bounded, then
  // dropped) in each machine's inbound queue. For load tests of the agent
  // alone, so the machines' ledgers do not compete for the two cores.
  void pause(bool paused) { paused_ = paused; }
  const std::vector<std::string>& ids() const { return ids_; }
  const FleetSpec& spec() const { return spec_; }
  int online() const;

 private:
  Fleet(FleetSpec spec, FleetTarget target);
  Status provision_and_boot(Logger& log);
  void step_loop(size_t first, size_t stride);
  Status wait_online(std::chrono::seconds timeout);

  FleetSpec spec_;
  FleetTarget server_;
  std::vector<std::string> ids_;
  std::vector<std::unique_ptr<sim::LiveMachine>> machines_;
  std::vector<std::thread> steppers_;
  std::atomic<bool> run_{false};
  std::atomic<bool> paused_{false};
};

// One customer (or the gateway): a keep-alive HTTP client. Not thread-safe.
// A payment notification as the gateway sends it, signed now: its JSON body
// and the value of its signature header (webhook::kHeader).
struct SignedPayment {
  std::string body;
  std::string signature;
};
SignedPayment signed_payment(const std::string& gateway_secret, const std::string& order_id,
                             const std::string& payment_id, int64_t amount_cents);

class HttpCustomer {
 public:
  struct Reply {
    int status = 0;  // 0: no HTTP answer (connection error)
    std::string body;
  };
  HttpCustomer(int port, std::string gateway_secret, std::string operator_token = "");
  ~HttpCustomer();
  HttpCustomer(const HttpCustomer&) = delete;
  HttpCustomer& operator=(const HttpCustomer&) = delete;

  // Each order carries its own X-Client-Id: a load generator plays many
  // shoppers, whose phones each send their own id (docs/agent.md "Rate
  // limits"); the client limit is tested in tests/agent/http_rate_limits_test.
  Reply create_order(const std::string& device, int slot);
  // The gateway's notification, HMAC-SHA256 signed.
  Reply pay(const std::string& order_id, const std::string& payment_id, int64_t amount_cents);
  Reply get(const std::string& path, bool as_operator = false);
  // A bodiless POST (cancel).
  Reply post(const std::string& path);

 private:
  std::unique_ptr<httplib::Client> client_;
  std::string gateway_secret_;
  std::string bearer_;
  std::string shopper_prefix_;  // of the X-Client-Id of each order
  uint64_t orders_ = 0;
};

// The string value of `field` in a JSON object body ("" when absent).
std::string json_string(const std::string& body, const std::string& field);
// A Prometheus sample: the value of the first line starting with `series`.
double metric_value(const std::string& metrics_text, const std::string& series);

// CPU time (user + system) a process has used so far, in seconds; 0 when
// unreadable (/proc/<pid>/stat).
double cpu_seconds(pid_t pid);

// Latency samples in microseconds -> percentile in milliseconds.
double percentile_ms(const std::vector<int64_t>& samples_us, double p);

}  // namespace vend::bench
