// The vendctl command line: pure parsing into CtlOptions, the --help text and
// the exit codes. No I/O.
//
//   vendctl watch [--mqtt URL] [--mqtt-username U --mqtt-password-file F]
//                 [--mqtt-ca-file F] [--once] [--for SECONDS]
//   vendctl devices | orders [--state S] [--limit N] | restock DEVICE SLOT COUNT
//   vendctl provision DEVICE --slot N:PRODUCT:PRICE_CENTS:CAPACITY ...
//   vendctl reconcile DEVICE [--wait SECONDS]
//   vendctl --version | --help
//   HTTP commands also take [--api URL] [--token-file F] [--json].
// The spellings of before (--username, --password-file, --ca-file) are
// accepted with a warning (CtlOptions::warnings).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vend/result.hpp"

namespace vend::ctl {

// Exit codes of vendctl (listed in usage()).
inline constexpr int kExitOk = 0;
inline constexpr int kExitApiError = 1;     // the agent answered an error, nonsense, or a
                                            // redirect outside its cluster
inline constexpr int kExitUsage = 2;        // bad command line or unreadable secret file
inline constexpr int kExitUnreachable = 3;  // agent or broker not reachable
inline constexpr int kExitNoReport = 4;     // reconcile: no report before --wait ended

enum class CommandKind {
  kHelp,
  kVersion,
  kWatch,
  kDevices,
  kOrders,
  kRestock,
  kProvision,
  kReconcile,
  kRotateKey,
  kDecommission
};

// One --slot of `provision`: "N:PRODUCT:PRICE_CENTS:CAPACITY". PRODUCT may
// itself contain ':' (the first and the last two fields are split off).
struct ProvisionSlot {
  int slot = 0;
  std::string product;
  int64_t price_cents = 0;
  int capacity = 0;
  bool operator==(const ProvisionSlot&) const = default;
};

struct CtlOptions {
  CommandKind command = CommandKind::kHelp;
  // watch
  std::string mqtt_url = "tcp://127.0.0.1:1883";
  std::optional<std::string> username;
  std::optional<std::string> password_file;
  // ssl:// and mqtts:// only: the trust store (default: Debian's CA bundle).
  std::string ca_file = "/etc/ssl/certs/ca-certificates.crt";
  bool once = false;
  // watch: stop after this long; with --once: how long to collect before the
  // one frame (default kOnceCollectMs).
  std::optional<int64_t> for_ms;
  // HTTP commands
  std::string api_url = "http://127.0.0.1:8080";
  std::optional<std::string> token_file;  // else $VEND_OPERATOR_TOKEN, else no token
  bool json = false;
  std::optional<std::string> state;  // orders
  std::optional<int> limit;          // orders
  std::string device;                // restock, provision, reconcile
  int slot = 0;                      // restock
  int count = 0;                     // restock
  std::vector<ProvisionSlot> slots;  // provision
  int64_t wait_ms = 30000;           // reconcile
  // One line each, for stderr: deprecated spellings that were used.
  std::vector<std::string> warnings;
};

// How long `watch --once` collects retained messages by default.
inline constexpr int64_t kOnceCollectMs = 1000;

// `args` excludes argv[0]. Accepts "--opt value" and "--opt=value", options
// before or after the positional arguments. An option that does not belong
// to the command is refused. Errors: code "bad_usage", message naming the
// option or argument.
Result<CtlOptions> parse_args(const std::vector<std::string>& args);

// Parses one --slot value. Errors: "bad_usage".
Result<ProvisionSlot> parse_provision_slot(const std::string& text);

// The --help text, exit codes included.
std::string usage();

}  // namespace vend::ctl
