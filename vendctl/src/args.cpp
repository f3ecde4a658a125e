#include "vend/ctl/args.hpp"

#include <array>
#include <charconv>
#include <functional>
#include <string_view>

#include "vend/topics.hpp"

namespace vend::ctl {

namespace {

using K = CommandKind;

Error usage_error(std::string message) { return make_error("bad_usage", std::move(message)); }

struct CommandName {
  std::string_view name;
  CommandKind kind;
  size_t positionals;  // exact count
  std::string_view synopsis;
};

constexpr std::array<CommandName, 11> kCommands = {{
    {"watch", K::kWatch, 0, "watch"},
    {"devices", K::kDevices, 0, "devices"},
    {"orders", K::kOrders, 0, "orders"},
    {"restock", K::kRestock, 3, "restock DEVICE SLOT COUNT"},
    {"provision", K::kProvision, 1, "provision DEVICE --slot N:PRODUCT:PRICE_CENTS:CAPACITY ..."},
    {"reconcile", K::kReconcile, 1, "reconcile DEVICE"},
    {"rotate-key", K::kRotateKey, 1, "rotate-key DEVICE"},
    {"decommission", K::kDecommission, 1, "decommission DEVICE"},
    {"help", K::kHelp, 0, "help"},
    {"--help", K::kHelp, 0, "--help"},
    {"--version", K::kVersion, 0, "--version"},
}};

// Spellings of before, accepted with a warning: the broker options are
// spelled as vend-agent's (--mqtt-...).
struct Renamed {
  std::string_view old_name;
  std::string_view name;
};
constexpr std::array<Renamed, 3> kRenamed = {{
    {"--username", "--mqtt-username"},
    {"--password-file", "--mqtt-password-file"},
    {"--ca-file", "--mqtt-ca-file"},
}};

bool is_http(CommandKind k) {
  return k == K::kDevices || k == K::kOrders || k == K::kRestock || k == K::kProvision ||
         k == K::kReconcile || k == K::kRotateKey || k == K::kDecommission;
}

Result<int64_t> parse_int(std::string_view what, std::string_view text, int64_t lo, int64_t hi) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    return usage_error(std::string(what) + ": '" + std::string(text) + "' must be an integer in " +
                       std::to_string(lo) + ".." + std::to_string(hi));
  }
  return v;
}

// One option: its name, whether it takes a value, which commands accept it,
// and how it is stored.
struct OptionSpec {
  std::string_view name;
  bool takes_value;
  bool (*applies)(CommandKind);
  std::function<Status(CtlOptions&, const std::string&)> set;
};

bool for_watch(CommandKind k) { return k == K::kWatch; }
bool for_orders(CommandKind k) { return k == K::kOrders; }
bool for_provision(CommandKind k) { return k == K::kProvision; }
bool for_reconcile(CommandKind k) { return k == K::kReconcile; }

Status set_seconds(std::optional<int64_t>& out, const char* name, const std::string& v) {
  auto s = parse_int(name, v, 1, 86400);
  if (!s.ok()) return s.error();
  out = *s * 1000;
  return {};
}

using Setter = std::function<Status(CtlOptions&, const std::string&)>;

// Stores the value as given.
template <typename Field>
Setter set_text(Field CtlOptions::*field) {
  return [field](CtlOptions& o, const std::string& v) -> Status {
    o.*field = v;
    return {};
  };
}

// An option without a value: sets `field`.
Setter set_flag(bool CtlOptions::*field) {
  return [field](CtlOptions& o, const std::string&) -> Status {
    o.*field = true;
    return {};
  };
}

Status parse_for(CtlOptions& o, const std::string& v) { return set_seconds(o.for_ms, "--for", v); }

Status parse_state(CtlOptions& o, const std::string& v) {
  const bool ok =
      !v.empty() && v.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_") == std::string::npos;
  if (!ok) return usage_error("--state '" + v + "' must be a state like PAID");
  o.state = v;
  return {};
}

Status parse_limit(CtlOptions& o, const std::string& v) {
  auto n = parse_int("--limit", v, 1, 1000);
  if (!n.ok()) return n.error();
  o.limit = static_cast<int>(*n);
  return {};
}

Status add_slot(CtlOptions& o, const std::string& v) {
  auto s = parse_provision_slot(v);
  if (!s.ok()) return s.error();
  o.slots.push_back(*s);
  return {};
}

Status parse_wait(CtlOptions& o, const std::string& v) {
  std::optional<int64_t> ms;
  if (auto s = set_seconds(ms, "--wait", v); !s.ok()) return s;
  o.wait_ms = *ms;
  return {};
}

const std::vector<OptionSpec>& option_specs() {
  static const std::vector<OptionSpec> kSpecs = {
      {"--mqtt", true, for_watch, set_text(&CtlOptions::mqtt_url)},
      {"--mqtt-username", true, for_watch, set_text(&CtlOptions::username)},
      {"--mqtt-password-file", true, for_watch, set_text(&CtlOptions::password_file)},
      {"--mqtt-ca-file", true, for_watch, set_text(&CtlOptions::ca_file)},
      {"--once", false, for_watch, set_flag(&CtlOptions::once)},
      {"--for", true, for_watch, parse_for},
      {"--api", true, is_http, set_text(&CtlOptions::api_url)},
      {"--token-file", true, is_http, set_text(&CtlOptions::token_file)},
      {"--json", false, is_http, set_flag(&CtlOptions::json)},
      {"--state", true, for_orders, parse_state},
      {"--limit", true, for_orders, parse_limit},
      {"--slot", true, for_provision, add_slot},
      {"--wait", true, for_reconcile, parse_wait},
  };
  return kSpecs;
}

const OptionSpec* find_option(std::string_view name) {
  for (const OptionSpec& spec : option_specs()) {
    if (spec.name == name) return &spec;
  }
  return nullptr;
}

// Stores the positional arguments of the command.
Status set_positionals(CtlOptions& o, const std::vector<std::string>& pos) {
  if (o.command == K::kRestock) {
    auto slot = parse_int("SLOT", pos[1], 1, 255);
    if (!slot.ok()) return slot.error();
    auto count = parse_int("COUNT", pos[2], 1, 1000);
    if (!count.ok()) return count.error();
    o.slot = static_cast<int>(*slot);
    o.count = static_cast<int>(*count);
  }
  if (!pos.empty()) {
    if (!topics::is_valid_device_id(pos[0])) {
      return usage_error("DEVICE '" + pos[0] + "' must be 1..64 chars of [A-Za-z0-9._-]");
    }
    o.device = pos[0];
  }
  if (o.command == K::kProvision && o.slots.empty()) {
    return usage_error("provision: at least one --slot N:PRODUCT:PRICE_CENTS:CAPACITY");
  }
  if (o.command == K::kWatch && (o.username.has_value() != o.password_file.has_value())) {
    return usage_error("--mqtt-username and --mqtt-password-file go together");
  }
  return {};
}

// Applies args[i] (an option) and, when it takes one, its value; advances i.
Status apply_option(CtlOptions& o, const std::vector<std::string>& args, size_t& i,
                    std::string_view command) {
  const std::string& arg = args[i];
  const size_t eq = arg.find('=');
  std::string name = arg.substr(0, eq);
  for (const Renamed& r : kRenamed) {
    if (name != r.old_name) continue;
    o.warnings.push_back(name + " is deprecated; use " + std::string(r.name));
    name = r.name;
  }
  const OptionSpec* spec = find_option(name);
  if (spec == nullptr) return usage_error("unknown option " + name);
  if (!spec->applies(o.command)) {
    return usage_error(name + " is not an option of " + std::string(command));
  }
  if (!spec->takes_value) {
    if (eq != std::string::npos) return usage_error(name + " takes no value");
    return spec->set(o, "");
  }
  if (eq != std::string::npos) return spec->set(o, arg.substr(eq + 1));
  if (i + 1 >= args.size()) return usage_error(name + ": missing value");
  return spec->set(o, args[++i]);
}

}  // namespace

Result<ProvisionSlot> parse_provision_slot(const std::string& text) {
  const size_t first = text.find(':');
  const size_t last = text.rfind(':');
  const size_t middle =
      last == std::string::npos || last == 0 ? std::string::npos : text.rfind(':', last - 1);
  if (first == std::string::npos || middle == std::string::npos || middle <= first) {
    return usage_error("--slot '" + text + "' must be N:PRODUCT:PRICE_CENTS:CAPACITY");
  }
  ProvisionSlot s;
  auto slot = parse_int("--slot N", std::string_view(text).substr(0, first), 1, 255);
  if (!slot.ok()) return slot.error();
  s.product = text.substr(first + 1, middle - first - 1);
  if (s.product.empty()) return usage_error("--slot '" + text + "': PRODUCT is empty");
  auto price = parse_int("--slot PRICE_CENTS",
                         std::string_view(text).substr(middle + 1, last - middle - 1), 0, 10000000);
  if (!price.ok()) return price.error();
  auto capacity = parse_int("--slot CAPACITY", std::string_view(text).substr(last + 1), 1, 1000);
  if (!capacity.ok()) return capacity.error();
  s.slot = static_cast<int>(*slot);
  s.price_cents = *price;
  s.capacity = static_cast<int>(*capacity);
  return s;
}

Result<CtlOptions> parse_args(const std::vector<std::string>& args) {
  CtlOptions o;
  if (args.empty()) return usage_error("missing command (try vendctl --help)");
  const CommandName* command = nullptr;
  for (const CommandName& c : kCommands) {
    if (c.name == args[0]) command = &c;
  }
  if (command == nullptr) return usage_error("unknown command '" + args[0] + "'");
  o.command = command->kind;
  if (o.command == K::kHelp) return o;
  if (o.command == K::kVersion) {
    if (args.size() > 1) return usage_error("--version takes no arguments");
    return o;
  }
  std::vector<std::string> positionals;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      o.command = K::kHelp;
      return o;
    }
    if (args[i].size() > 1 && args[i][0] == '-') {
      if (auto s = apply_option(o, args, i, command->name); !s.ok()) return s.error();
    } else {
      positionals.push_back(args[i]);
    }
  }
  if (positionals.size() != command->positionals) {
    return usage_error("usage: vendctl " + std::string(command->synopsis));
  }
  if (auto s = set_positionals(o, positionals); !s.ok()) return s.error();
  return o;
}

std::string usage() {
  return R"(vendctl: operate a Vend fleet (docs/operations.md)

usage:
  vendctl watch [--mqtt URL] [--mqtt-username U --mqtt-password-file F]
                [--mqtt-ca-file F] [--once] [--for SECONDS]
      Live fleet view from the agent's ops topics (vend/v1/ops/#), redrawn in place
      (at most 4 frames/s). --for: stop after SECONDS. --once: print one plain frame
      after collecting the retained messages for 1 s (or --for SECONDS) and exit.
      Default --mqtt tcp://127.0.0.1:1883; ssl://HOST:8883 checks the broker's
      certificate against --mqtt-ca-file (default /etc/ssl/certs/ca-certificates.crt).
      The spellings --username, --password-file and --ca-file still work, with a warning.
  vendctl devices                          devices with presence and last seen
  vendctl orders [--state S] [--limit N]   latest orders (N 1..1000, default 100)
  vendctl restock DEVICE SLOT COUNT        send a restock order (COUNT 1..1000)
  vendctl provision DEVICE --slot N:PRODUCT:PRICE_CENTS:CAPACITY ...
                                           register a device; prints its key ONCE
  vendctl reconcile DEVICE [--wait SECONDS]
                                           ask for a full reconciliation and wait
                                           for its report (default 30 s)
  vendctl rotate-key DEVICE                issue a new key; prints it ONCE (the old key
                                           works until the device signs with the new one)
  vendctl decommission DEVICE              out of service for good: pools withdrawn,
                                           reservations cancelled, key revoked

HTTP options (devices, orders, restock, provision, reconcile, rotate-key, decommission):
  --api URL          the agent's API (default http://127.0.0.1:8080)
  --token-file F     operator bearer token (else $VEND_OPERATOR_TOKEN; none: no header)
  --json             print the agent's JSON instead of a table
  Several agents: a 307/308 to another agent is followed (method, body and token
  re-sent, at most 3 times) only when its origin is one of the member URLs that
  GET /v1/cluster of --api lists; anywhere else is the error redirect_refused.

  vendctl --version                        print the version

exit codes:
  0  done
  1  the agent answered an error (shown as "vendctl: <code>: <message>") or nonsense,
     or redirected outside its cluster (redirect_refused), or another failure (named)
  2  bad usage, or an unreadable token/password file
  3  the agent or the broker could not be reached
  4  reconcile: no report before --wait ended
)";
}

}  // namespace vend::ctl
