// The operator subcommands of vend-firmware. Each returns a process exit
// code (setup.hpp), prints its result to `out` and its errors to `err`.
// They open the same ledger as a running daemon; SQLite arbitrates, and the
// daemon publishes any event they write on its next outbox drain.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace vend::fw {

// `restock`: confirms that `count` items were loaded into `slot`; mints their
// tokens. Idempotent per restock id (a generated one when empty).
struct RestockArgs {
  std::string config_path;
  int slot = 0;
  int count = 0;
  std::string restock_id;
};
int run_restock(const RestockArgs& args, std::ostream& out, std::ostream& err);

// `status`: slots, dispenses by state, outbox. Read-only.
struct StatusArgs {
  std::string config_path;
  bool json = false;
  bool tokens = false;  // list each slot's available token ids
};
int run_status(const StatusArgs& args, std::ostream& out, std::ostream& err);

// `check-config`: everything `run` would load before it connects: the
// config, the key and password files (private, parseable), the TLS files
// (they parse), and the ledger (opened when it exists; else its directory
// must exist for the daemon to create it). Prints one line per check; exit
// 0 when all pass, 2 (bad config or key) or 1 (ledger) at the first failure.
struct CheckConfigArgs {
  std::string config_path;
};
int run_check_config(const CheckConfigArgs& args, std::ostream& out, std::ostream& err);

// `keygen`: a new device key as 64 hex chars, on stdout or into a new file
// (mode 0600; an existing file is never overwritten).
struct KeygenArgs {
  std::string out_file;
};
int run_keygen(const KeygenArgs& args, std::ostream& out, std::ostream& err);

// `sign-dispense`: prints a dispense command signed with the device key, for
// mosquitto_pub (testing and bench work). Without a token, the slot's first
// available token in the ledger is used.
struct SignDispenseArgs {
  std::string config_path;
  std::string order_id;
  int slot = 0;
  std::string token;
  int64_t ttl_s = 60;
};
int run_sign_dispense(const SignDispenseArgs& args, std::ostream& out, std::ostream& err);

}  // namespace vend::fw
