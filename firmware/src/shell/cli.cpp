#include "shell/cli.hpp"

#include <charconv>
#include <map>
#include <optional>
#include <set>

#include "shell/daemon.hpp"
#include "shell/operator_commands.hpp"
#include "shell/setup.hpp"
#include "vend/protocol.hpp"
#include "vend/result.hpp"

#ifndef VEND_VERSION
#define VEND_VERSION "0.0.0"
#endif

namespace vend::fw {

namespace {

constexpr const char* kUsage = R"(usage:
  vend-firmware --config FILE [--log-level debug|info|warn|error]
      run the device daemon
  vend-firmware restock --config FILE --slot S --count N [--restock-id ID]
      confirm that N items were loaded into slot S: mint their sale tokens
  vend-firmware status --config FILE [--json] [--tokens]
      slots, dispenses by state and the outbox, from the ledger
  vend-firmware sign-dispense --config FILE --order ID --slot S [--token T] [--ttl-s SECONDS]
      print a dispense command signed with the device key (for testing)
  vend-firmware keygen [--out FILE]
      a new device key (64 hex chars)
  vend-firmware check-config --config FILE
      load everything the daemon loads (config, key, password and TLS files, ledger)
  vend-firmware --help | --version
)";

// What one subcommand accepts.
struct Spec {
  std::set<std::string> values;    // --name VALUE
  std::set<std::string> flags;     // --name
  std::set<std::string> required;  // among values
};

const std::map<std::string, Spec>& specs() {
  static const std::map<std::string, Spec> kSpecs = {
      {"run", {{"config", "log-level"}, {}, {"config"}}},
      {"restock", {{"config", "slot", "count", "restock-id"}, {}, {"config", "slot", "count"}}},
      {"status", {{"config"}, {"json", "tokens"}, {"config"}}},
      {"sign-dispense",
       {{"config", "order", "slot", "token", "ttl-s"}, {}, {"config", "order", "slot"}}},
      {"keygen", {{"out"}, {}, {}}},
      {"check-config", {{"config"}, {}, {"config"}}},
  };
  return kSpecs;
}

struct Parsed {
  std::string command;
  std::map<std::string, std::string> values;
  std::set<std::string> flags;

  const std::string& value(const std::string& name) const {
    static const std::string kEmpty;
    auto it = values.find(name);
    return it == values.end() ? kEmpty : it->second;
  }
};

Error usage_error(const std::string& what) { return make_error("usage", what); }

Status parse_option(const Spec& spec, const std::vector<std::string>& args, size_t& i, Parsed& p) {
  const std::string& arg = args[i];
  if (arg.rfind("--", 0) != 0) return usage_error("unexpected argument '" + arg + "'");
  std::string name = arg.substr(2);
  std::optional<std::string> inline_value;
  if (auto eq = name.find('='); eq != std::string::npos) {
    inline_value = name.substr(eq + 1);
    name = name.substr(0, eq);
  }
  if (spec.flags.count(name) && !inline_value) {
    p.flags.insert(name);
    return {};
  }
  if (!spec.values.count(name)) return usage_error("unknown option '--" + name + "'");
  if (p.values.count(name)) return usage_error("option '--" + name + "' given twice");
  if (!inline_value && i + 1 >= args.size()) return usage_error("'--" + name + "' needs a value");
  p.values[name] = inline_value ? *inline_value : args[++i];
  return {};
}

Result<Parsed> parse(const std::vector<std::string>& args) {
  Parsed p;
  size_t i = 0;
  p.command = !args.empty() && args[0].rfind("--", 0) != 0 ? args[i++] : "run";
  auto spec = specs().find(p.command);
  if (spec == specs().end()) return usage_error("unknown command '" + p.command + "'");
  for (; i < args.size(); ++i) {
    if (auto s = parse_option(spec->second, args, i, p); !s.ok()) return s.error();
  }
  for (const auto& name : spec->second.required) {
    if (!p.values.count(name)) return usage_error("'--" + name + "' is required");
  }
  return p;
}

Result<int64_t> parse_int(const Parsed& p, const std::string& name, int64_t lo, int64_t hi) {
  const std::string& text = p.value(name);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || v < lo || v > hi) {
    return usage_error("'--" + name + "' must be an integer in " + std::to_string(lo) + ".." +
                       std::to_string(hi) + ", not '" + text + "'");
  }
  return v;
}

Result<LogLevel> parse_level(const std::string& text) {
  if (text.empty() || text == "info") return LogLevel::kInfo;
  if (text == "debug") return LogLevel::kDebug;
  if (text == "warn") return LogLevel::kWarn;
  if (text == "error") return LogLevel::kError;
  return usage_error("'--log-level' must be debug, info, warn or error");
}

int usage(std::ostream& err, const Error& error) {
  err << "vend-firmware: " << error.message << "\n" << kUsage;
  return kExitUsage;
}

int run_parsed(const Parsed& p, std::ostream& out, std::ostream& err) {
  const std::string& cmd = p.command;
  if (cmd == "run") {
    auto level = parse_level(p.value("log-level"));
    if (!level.ok()) return usage(err, level.error());
    return run_daemon(DaemonArgs{p.value("config"), *level});
  }
  if (cmd == "status") {
    return run_status({p.value("config"), p.flags.count("json") > 0, p.flags.count("tokens") > 0},
                      out, err);
  }
  if (cmd == "keygen") return run_keygen({p.value("out")}, out, err);
  if (cmd == "check-config") return run_check_config({p.value("config")}, out, err);
  auto slot = parse_int(p, "slot", 1, 255);
  if (!slot.ok()) return usage(err, slot.error());
  if (cmd == "restock") {
    auto count = parse_int(p, "count", 1, 1000);
    if (!count.ok()) return usage(err, count.error());
    return run_restock({p.value("config"), static_cast<int>(*slot), static_cast<int>(*count),
                        p.value("restock-id")},
                       out, err);
  }
  if (!proto::is_valid_id(p.value("order"))) {
    return usage(err, usage_error("'--order' must be 1..64 chars of [A-Za-z0-9._-]"));
  }
  if (p.values.count("token") && !proto::is_valid_token(p.value("token"))) {
    return usage(err, usage_error("'--token' must be 32 lowercase hex chars"));
  }
  auto ttl = p.values.count("ttl-s") ? parse_int(p, "ttl-s", 1, 86400) : Result<int64_t>(60);
  if (!ttl.ok()) return usage(err, ttl.error());
  return run_sign_dispense(
      {p.value("config"), p.value("order"), static_cast<int>(*slot), p.value("token"), *ttl}, out,
      err);
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h" || args[0] == "help")) {
    out << kUsage;
    return kExitOk;
  }
  if (args.size() == 1 && args[0] == "--version") {
    out << "vend-firmware " << VEND_VERSION << "\n";
    return kExitOk;
  }
  auto parsed = parse(args);
  if (!parsed.ok()) return usage(err, parsed.error());
  return run_parsed(*parsed, out, err);
}

}  // namespace vend::fw
