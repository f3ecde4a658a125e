// The vend-sim command line. Pure parsing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vend/result.hpp"
#include "world/world.hpp"

namespace vend::sim {

// The live fleet's options (live.hpp).
struct LiveOptions {
  bool launch = false;         // start mosquitto and vend-agent in the work dir
  std::string broker_url;      // attach: tcp://host:port (--mqtt)
  std::string agent_url;       // attach: http://host:port
  std::string operator_token;  // attach: the agent's operator token
  std::string gateway_secret;  // attach: the agent's gateway secret
  // The same from files (one line each, mode 0600: read by LiveRun, not here);
  // the command-line forms are visible in ps and work with a warning.
  std::string operator_token_file;
  std::string gateway_secret_file;
  std::string agent_db;  // attach: the agent's database, for the final check
  // Attach to a broker on the production config (deploy/mosquitto): each
  // machine logs in with username = its device id and the password in
  // mqtt_password_dir/<device id> (one line, as add-user --secret-out writes
  // it); "" = anonymous. mqtt_ca_file: the CA of an ssl:// broker.
  std::string mqtt_password_dir;
  std::string mqtt_ca_file;
  // Machine ids are <id_prefix>-001, -002, ...; "" = sim-<6 hex digits of the seed>.
  std::string id_prefix;
  std::string agent_bin;  // launch: vend-agent ("" = next to vend-sim, then PATH)
  std::string mosquitto_bin = "mosquitto";
  int machines = 20;
  int slots = 8;
  int capacity = 10;
  int customers = 8;  // concurrent customer threads
  double rate = 10;   // orders per second, all customers together
  double duration_s = 60;
  double jam = 0.02;               // per rotation
  double offline_per_min = 0;      // per machine: connection drops for a few seconds
  double crash_per_min = 0;        // per machine: kill -9 + reboot (ledger reopened)
  double duplicate = 0;            // per command and per event: delivered twice
  double agent_restart_s = 0;      // launch only: restart the agent every N s (0 = never)
  double abandon = 0.1;            // never pay (the reservation expires)
  double pay_twice = 0.05;         // a second payment with another payment id
  int64_t reservation_ttl_s = 10;  // launch only
  int64_t dispatch_ttl_s = 15;     // launch only: a lost command is resolved after this
  double settle_timeout_s = 90;    // after the sales: wait this long for paid orders to finish
  uint64_t seed = 0;               // 0 = from the time
  bool progress = true;            // the live progress line on stderr
};

struct Command {
  enum class Mode { kLive, kDeterministic, kCheck, kHelp, kVersion };
  Mode mode = Mode::kLive;
  bool json = false;
  std::string work_dir;
  std::string scenario_path;  // --scenario, for the reproduce line
  // Deterministic.
  WorldOptions world;
  uint64_t first_seed = 1;
  uint64_t seed_count = 1;
  LiveOptions live;
  // One line each, for stderr: deprecated spellings that were used
  // (--broker, now --mqtt as in vend-agent and vendctl).
  std::vector<std::string> warnings;
};

// `args` excludes argv[0]. Errors: "bad_usage", naming the option.
Result<Command> parse_command(const std::vector<std::string>& args);
std::string usage();

}  // namespace vend::sim
