#include "live/cli.hpp"

#include <charconv>
#include <functional>
#include <map>

#include "vend/topics.hpp"

namespace vend::sim {

namespace {

Error bad(const std::string& m) { return make_error("bad_usage", m); }

FaultRates no_faults() {
  FaultRates f;
  f.drop = f.duplicate = f.delay = f.reorder = f.partition = f.offline = 0;
  f.machine_crash = f.agent_crash = f.clock_skew = f.jam = 0;
  return f;
}

template <typename T>
Status parse_number(const std::string& name, const std::string& text, T& out) {
  T v{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return bad(name + ": not a number: '" + text + "'");
  }
  out = v;
  return {};
}

using Apply = std::function<Status(const std::string& value)>;

template <typename T>
Apply num(const std::string& name, T& field) {
  return [name, &field](const std::string& v) { return parse_number(name, v, field); };
}
Apply str(std::string& field) {
  return [&field](const std::string& v) {
    field = v;
    return Status{};
  };
}

// "A..B" or "N" (one seed) for --seeds; --seed S is one seed.
Status parse_seeds(const std::string& text, Command& c) {
  size_t dots = text.find("..");
  if (dots == std::string::npos) {
    if (Status s = parse_number("--seeds", text, c.seed_count); !s.ok()) return s;
    return {};
  }
  uint64_t last = 0;
  if (Status s = parse_number("--seeds", text.substr(0, dots), c.first_seed); !s.ok()) return s;
  if (Status s = parse_number("--seeds", text.substr(dots + 2), last); !s.ok()) return s;
  if (last < c.first_seed) return bad("--seeds: empty range '" + text + "'");
  c.seed_count = last - c.first_seed + 1;
  return {};
}

std::map<std::string, Apply> valued(Command& c) {
  WorldOptions& w = c.world;
  LiveOptions& l = c.live;
  return {
      {"--seed",
       [&c](const std::string& v) {
         Status s = parse_number("--seed", v, c.first_seed);
         c.live.seed = c.first_seed;
         return s;
       }},
      {"--seeds", [&c](const std::string& v) { return parse_seeds(v, c); }},
      {"--scenario",
       [&w, &c](const std::string& v) {
         c.scenario_path = v;
         auto loaded = load_scenario(v, w);
         if (!loaded.ok()) return Status(loaded.error());
         w = *loaded;
         return Status{};
       }},
      {"--steps", num("--steps", w.steps)},
      {"--agents", num("--agents", w.agents)},
      {"--trace", str(w.trace_path)},
      {"--work-dir", str(c.work_dir)},
      {"--machines", num("--machines", l.machines)},
      {"--slots", num("--slots", l.slots)},
      {"--capacity", num("--capacity", l.capacity)},
      {"--customers", num("--customers", l.customers)},
      {"--rate", num("--rate", l.rate)},
      {"--duration", num("--duration", l.duration_s)},
      {"--jam-rate", num("--jam-rate", l.jam)},
      {"--offline-rate", num("--offline-rate", l.offline_per_min)},
      {"--crash-rate", num("--crash-rate", l.crash_per_min)},
      {"--duplicate-rate", num("--duplicate-rate", l.duplicate)},
      {"--agent-restart", num("--agent-restart", l.agent_restart_s)},
      {"--abandon", num("--abandon", l.abandon)},
      {"--pay-twice", num("--pay-twice", l.pay_twice)},
      {"--reservation-ttl-s", num("--reservation-ttl-s", l.reservation_ttl_s)},
      {"--dispatch-ttl-s", num("--dispatch-ttl-s", l.dispatch_ttl_s)},
      {"--settle-timeout", num("--settle-timeout", l.settle_timeout_s)},
      {"--mqtt", str(l.broker_url)},
      {"--agent", str(l.agent_url)},
      {"--operator-token", str(l.operator_token)},
      {"--gateway-secret", str(l.gateway_secret)},
      {"--operator-token-file", str(l.operator_token_file)},
      {"--gateway-secret-file", str(l.gateway_secret_file)},
      {"--agent-db", str(l.agent_db)},
      {"--mqtt-password-dir", str(l.mqtt_password_dir)},
      {"--mqtt-ca-file", str(l.mqtt_ca_file)},
      {"--id-prefix", str(l.id_prefix)},
      {"--agent-bin", str(l.agent_bin)},
      {"--mosquitto-bin", str(l.mosquitto_bin)},
  };
}

// Live machines/slots also size the deterministic world when given.
void share_sizes(Command& c, const std::map<std::string, bool>& given) {
  if (given.count("--machines")) c.world.machines = c.live.machines;
  if (given.count("--slots")) c.world.slots = c.live.slots;
  if (given.count("--capacity")) c.world.capacity = c.live.capacity;
  if (given.count("--jam-rate")) c.world.faults.jam = c.live.jam;
}

// PREFIX-NNN must be a device id (the broker's ACL patterns rely on it).
bool valid_id_prefix(const std::string& p) {
  return p.size() <= 56 && topics::is_valid_device_id(p + "-001");
}

Status check_live(const Command& c) {
  const LiveOptions& l = c.live;
  if (l.machines < 1 || l.machines > 2000) return bad("--machines: 1..2000");
  if (l.slots < 1 || l.slots > 64) return bad("--slots: 1..64");
  if (l.capacity < 1 || l.capacity > 1000) return bad("--capacity: 1..1000");
  if (l.customers < 1 || l.customers > 256) return bad("--customers: 1..256");
  if (l.rate <= 0 || l.duration_s <= 0) return bad("--rate and --duration must be > 0");
  if (!l.id_prefix.empty() && !valid_id_prefix(l.id_prefix)) {
    return bad("--id-prefix '" + l.id_prefix +
               "': 1..56 characters of A-Z a-z 0-9 . _ - (a device id is PREFIX-NNN)");
  }
  if (c.mode != Command::Mode::kLive || l.launch) {
    if (l.launch && (!l.mqtt_password_dir.empty() || !l.mqtt_ca_file.empty())) {
      return bad(
          "--mqtt-password-dir and --mqtt-ca-file are for a broker of your own (--mqtt), "
          "not --launch");
    }
    return {};
  }
  if (l.broker_url.rfind("ssl://", 0) == 0 && l.mqtt_ca_file.empty()) {
    return bad("--mqtt " + l.broker_url + ": ssl:// needs --mqtt-ca-file (the broker's CA)");
  }
  if (!l.operator_token.empty() && !l.operator_token_file.empty()) {
    return bad("--operator-token and --operator-token-file exclude each other");
  }
  if (!l.gateway_secret.empty() && !l.gateway_secret_file.empty()) {
    return bad("--gateway-secret and --gateway-secret-file exclude each other");
  }
  if (l.broker_url.empty() || l.agent_url.empty() ||
      (l.operator_token.empty() && l.operator_token_file.empty()) ||
      (l.gateway_secret.empty() && l.gateway_secret_file.empty())) {
    return bad(
        "live mode needs --launch, or --mqtt, --agent, --operator-token-file and "
        "--gateway-secret-file");
  }
  return {};
}

// An option without a value.
Status apply_flag(const std::string& name, Command& c) {
  if (name == "--deterministic") {
    c.mode = Command::Mode::kDeterministic;
  } else if (name == "check" || name == "--check") {
    c.mode = Command::Mode::kCheck;
  } else if (name == "--launch") {
    c.live.launch = true;
  } else if (name == "--json") {
    c.json = true;
  } else if (name == "--no-progress") {
    c.live.progress = false;
  } else if (name == "--no-faults") {
    c.world.faults = no_faults();
  } else if (name == "--verbose") {
    c.world.verbose = true;
  } else if (name == "--help" || name == "-h") {
    c.mode = Command::Mode::kHelp;
  } else if (name == "--version") {
    c.mode = Command::Mode::kVersion;
  } else {
    return bad("unknown option '" + name + "' (see --help)");
  }
  return {};
}

// After every option: the sizes and seed shared with the world, and the
// rules between options.
Status finish_command(Command& c, const std::map<std::string, bool>& given) {
  share_sizes(c, given);
  c.world.work_dir = c.work_dir;
  c.world.seed = c.first_seed;
  if (c.mode == Command::Mode::kCheck && c.work_dir.empty()) {
    return bad("check needs --work-dir DIR (ledgers *.ledger.db and agent.db)");
  }
  if (c.seed_count > 1 && (!c.work_dir.empty() || !c.world.trace_path.empty())) {
    return bad("--work-dir and --trace take one seed, not --seeds");
  }
  return check_live(c);
}

}  // namespace

Result<Command> parse_command(const std::vector<std::string>& args) {
  Command c;
  auto table = valued(c);
  std::map<std::string, bool> given;
  for (size_t i = 0; i < args.size(); ++i) {
    std::string name = args[i];
    std::string value;
    bool has_value = false;
    if (size_t eq = name.find('='); name.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (name == "--broker") {  // the spelling of before
      c.warnings.push_back("--broker is deprecated; use --mqtt");
      name = "--mqtt";
    }
    if (name == "--operator-token" || name == "--gateway-secret") {
      std::string warning = name;
      warning.append(" on the command line is visible in ps; use ").append(name).append("-file");
      c.warnings.push_back(std::move(warning));
    }
    if (auto it = table.find(name); it != table.end()) {
      if (!has_value) {
        if (i + 1 >= args.size()) return bad(name + ": missing value");
        value = args[++i];
      }
      if (Status s = it->second(value); !s.ok()) return s.error();
      given[name] = true;
      continue;
    }
    if (has_value) return bad(name + ": takes no value");
    if (Status s = apply_flag(name, c); !s.ok()) return s.error();
  }
  if (c.mode == Command::Mode::kHelp || c.mode == Command::Mode::kVersion) return c;
  if (Status s = finish_command(c, given); !s.ok()) return s.error();
  return c;
}

std::string usage() {
  return R"(usage: vend-sim [live options]           a live fleet against a real broker and agent
       vend-sim --deterministic [options]   one thread, virtual time, seeded faults
       vend-sim check --work-dir DIR        check the ledgers and agent.db in DIR

Live fleet (docs/simulator.md):
  --launch                   start mosquitto and vend-agent in the work dir, stop them after
  --mqtt URL --agent URL[,URL...] --operator-token-file F --gateway-secret-file F [--agent-db PATH]
                             attach to running ones instead; several agents of one
                             cluster: requests spread over them, follow 307s, and are
                             retried on another after a 503 or no answer (--agent-db
                             is SQLite's: a postgresql:// one is not checked;
                             --broker URL, the spelling of before, works with a warning)
  --mqtt-password-dir DIR    a broker on the production config: each machine logs in as
                             its device id with the password in DIR/<device id>
  --mqtt-ca-file FILE        the CA of an ssl:// broker
  --id-prefix P              machine ids P-001, P-002, ... (default sim-<seed hex>)
  --machines N (20)  --slots N (8)  --capacity N (10)
  --customers N (8)  --rate ORDERS_PER_S (10)  --duration S (60)
  --abandon P (0.1)  --pay-twice P (0.05)
  --jam-rate P (0.02)  --offline-rate PER_MACHINE_PER_MIN (0)  --crash-rate PER_MACHINE_PER_MIN (0)
  --duplicate-rate P (0)  --agent-restart S (0: never; --launch only)
  --reservation-ttl-s S (10, --launch)  --dispatch-ttl-s S (15, --launch)
  --settle-timeout S (90: must exceed the agent's dispatch TTL + 5 s)
  --agent-bin PATH  --mosquitto-bin PATH  --work-dir DIR  --seed S  --json  --no-progress

Deterministic:
  --seed S | --seeds A..B | --seeds N   one seed, a range, or seeds 1..N
  --scenario FILE            options from simulator/scenarios/*.json
  --steps N  --machines N  --slots N  --capacity N  --jam-rate P  --no-faults
  --agents N                 N agent instances sharing the database with leases (1)
  --trace FILE               every trace line (one seed)
  --work-dir DIR             keep the ledgers and agent.db there (one seed)
  --json  --verbose

vend-sim --help | --version

Exit: 0 all invariants held; 1 an invariant broke (evidence printed); 2 bad usage or set-up.
)";
}

}  // namespace vend::sim
