// Scenario files: WorldOptions by field name (docs/simulator.md).
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cluster/lease_keeper.hpp"
#include "world/world.hpp"

namespace vend::sim {

namespace {

using Json = nlohmann::json;
using Setter = std::function<bool(const Json&)>;

template <typename T>
Setter number(T& field) {
  return [&field](const Json& v) {
    if constexpr (std::is_floating_point_v<T>) {
      if (!v.is_number()) return false;
      field = v.get<T>();
    } else {
      if (!v.is_number_integer()) return false;
      field = v.get<T>();
    }
    return true;
  };
}

std::map<std::string, Setter> world_fields(WorldOptions& o) {
  return {{"seed", number(o.seed)},
          {"machines", number(o.machines)},
          {"slots", number(o.slots)},
          {"capacity", number(o.capacity)},
          {"steps", number(o.steps)},
          {"max_advance_ms", number(o.max_advance_ms)},
          {"max_deliveries_per_step", number(o.max_deliveries_per_step)},
          {"order_rate", number(o.order_rate)},
          {"abandon", number(o.abandon)},
          {"cancel", number(o.cancel)},
          {"pay_twice", number(o.pay_twice)},
          {"late_pay", number(o.late_pay)},
          {"retry_pay", number(o.retry_pay)},
          {"plant_violation_at_step", number(o.plant_violation_at_step)},
          {"command_resend_ms", number(o.command_resend_ms)},
          {"agents", number(o.agents)},
          {"shards", number(o.shards)},
          {"lease_ms", number(o.lease_ms)},
          {"renew_ms", number(o.renew_ms)},
          {"lease_safety_ms", number(o.lease_safety_ms)},
          {"rebuild_ms_per_machine", number(o.rebuild_ms_per_machine)},
          {"max_calls_per_step", number(o.max_calls_per_step)},
          {"flood_rate", number(o.flood_rate)}};
}

std::map<std::string, Setter> fault_fields(FaultRates& f) {
  return {{"drop", number(f.drop)},
          {"duplicate", number(f.duplicate)},
          {"delay", number(f.delay)},
          {"max_delay_steps", number(f.max_delay_steps)},
          {"reorder", number(f.reorder)},
          {"partition", number(f.partition)},
          {"offline", number(f.offline)},
          {"machine_crash", number(f.machine_crash)},
          {"agent_crash", number(f.agent_crash)},
          {"clock_skew", number(f.clock_skew)},
          {"max_skew_ms", number(f.max_skew_ms)},
          {"jam", number(f.jam)},
          {"presence_race", number(f.presence_race)},
          {"agent_pause", number(f.agent_pause)},
          {"agent_db_partition", number(f.agent_db_partition)},
          {"agent_clock_skew", number(f.agent_clock_skew)},
          {"max_agent_drift_ppm", number(f.max_agent_drift_ppm)},
          {"agent_clock_step", number(f.agent_clock_step)},
          {"max_agent_step_ms", number(f.max_agent_step_ms)},
          {"command_lost", number(f.command_lost)},
          {"ledger_restore", number(f.ledger_restore)},
          {"restore_down_min_steps", number(f.restore_down_min_steps)}};
}

// "PATH: <before>NAME<after>".
Error bad_field(const std::string& path, const char* before, const std::string& name,
                const char* after) {
  std::string message = path;
  message.append(": ").append(before).append(name).append(after);
  return make_error("bad_scenario", message);
}

Status apply(const Json& object, std::map<std::string, Setter> fields, const std::string& where,
             const std::string& path) {
  for (const auto& [key, value] : object.items()) {
    if (where.empty() && (key == "name" || key == "description" || key == "faults")) continue;
    auto it = fields.find(key);
    std::string name = where;
    if (!name.empty()) name += '.';
    name += key;
    if (it == fields.end()) return bad_field(path, "unknown key '", name, "'");
    if (!it->second(value)) return bad_field(path, "'", name, "' must be a number");
  }
  return {};
}

Status validate(const WorldOptions& o, const std::string& path) {
  auto bad = [&](const char* what) { return make_error("bad_scenario", path + ": " + what); };
  if (o.machines < 1 || o.machines > 20'000) return bad("machines must be 1..20000");
  if (o.slots < 1 || o.slots > 64) return bad("slots must be 1..64");
  if (o.capacity < 1 || o.capacity > 1000) return bad("capacity must be 1..1000");
  if (o.steps < 0) return bad("steps must be >= 0");
  if (o.max_advance_ms < 0 || o.max_deliveries_per_step < 0) return bad("negative step sizes");
  if (o.command_resend_ms < 1) return bad("command_resend_ms must be >= 1");
  if (o.agents < 1 || o.agents > 16) return bad("agents must be 1..16");
  if (o.agents > 1) {
    agent::LeaseOptions lease{"a1", o.shards, o.lease_ms, o.renew_ms, o.lease_safety_ms};
    if (std::string why = agent::check_lease_options(lease); !why.empty()) {
      return make_error("bad_scenario", path + ": " + why);
    }
  }
  if (o.agents == 1 &&
      (o.rebuild_ms_per_machine != 0 || o.max_calls_per_step != 0 || o.flood_rate != 0)) {
    return bad("rebuild_ms_per_machine, max_calls_per_step and flood_rate need agents > 1");
  }
  if (o.rebuild_ms_per_machine < 0 || o.rebuild_ms_per_machine > 60'000) {
    return bad("rebuild_ms_per_machine must be 0..60000");
  }
  if (o.max_calls_per_step < 0) return bad("max_calls_per_step must be >= 0");
  if (o.flood_rate < 0 || o.flood_rate > 1000) return bad("flood_rate must be 0..1000");
  for (double rate : {o.faults.command_lost, o.faults.ledger_restore}) {
    if (rate < 0 || rate > 1)
      return bad("faults.command_lost and faults.ledger_restore must be 0..1");
  }
  if (o.faults.restore_down_min_steps < 1 || o.faults.restore_down_min_steps > 1'000'000) {
    return bad("faults.restore_down_min_steps must be 1..1000000");
  }
  if (o.faults.max_agent_drift_ppm < 0 || o.faults.max_agent_drift_ppm > 100'000) {
    return bad("faults.max_agent_drift_ppm must be 0..100000");
  }
  if (o.faults.max_agent_step_ms < 1000 || o.faults.max_agent_step_ms > 86'400'000) {
    return bad("faults.max_agent_step_ms must be 1000..86400000");
  }
  return {};
}

}  // namespace

Result<WorldOptions> load_scenario(const std::string& path, WorldOptions base) {
  std::ifstream in(path);
  if (!in) return make_error("bad_scenario", "cannot read '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  Json doc = Json::parse(text.str(), nullptr, false);
  if (doc.is_discarded() || !doc.is_object()) {
    return make_error("bad_scenario", path + ": not a JSON object");
  }
  if (Status s = apply(doc, world_fields(base), "", path); !s.ok()) return s.error();
  if (doc.contains("faults")) {
    if (!doc["faults"].is_object())
      return make_error("bad_scenario", path + ": 'faults' must be an object");
    if (Status s = apply(doc["faults"], fault_fields(base.faults), "faults", path); !s.ok()) {
      return s.error();
    }
  }
  if (doc.contains("name") && doc["name"].is_string())
    base.scenario = doc["name"].get<std::string>();
  if (Status s = validate(base, path); !s.ok()) return s.error();
  return base;
}

}  // namespace vend::sim
