#include "vend/fw/config.hpp"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "vend/protocol.hpp"

namespace vend::fw {

namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kBadConfig = "bad_config";
constexpr int kMaxGpioLine = 1023;

// The first problem found; later ones are ignored so that the message names
// the key an operator should fix first.
class Problems {
 public:
  void add(const std::string& path, const std::string& what) {
    if (!first_) first_ = path + ": " + what;
  }
  bool any() const { return first_.has_value(); }
  const std::string& first() const { return *first_; }

 private:
  std::optional<std::string> first_;
};

std::string range_text(int64_t lo, int64_t hi) {
  return "must be " + std::to_string(lo) + ".." + std::to_string(hi);
}

// Typed, range-checked access to one JSON object at `path` ("" for the root,
// "core", "slots[2]"). Every problem goes to the shared Problems.
class ObjectReader {
 public:
  ObjectReader(const Json& object, std::string path, Problems& problems)
      : object_(object), path_(std::move(path)), problems_(problems) {}

  std::string path_of(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  bool has(std::string_view key) const { return object_.contains(key); }
  const Json& at(std::string_view key) const { return object_.at(std::string(key)); }

  // Rejects every key not in `known` (a typo must not be silently ignored).
  void only(std::initializer_list<std::string_view> known) {
    for (const auto& [key, value] : object_.items()) {
      bool found = false;
      for (auto k : known) found = found || k == key;
      if (!found) problems_.add(path_of(key), "unknown key");
    }
  }
  void require(std::string_view key) {
    if (!has(key)) problems_.add(path_of(key), "required");
  }

  void text(std::string_view key, std::string& out, bool non_empty = true) {
    if (!has(key)) return;
    const Json& v = at(key);
    if (!v.is_string()) return problems_.add(path_of(key), "must be a string");
    if (non_empty && v.get_ref<const std::string&>().empty()) {
      return problems_.add(path_of(key), "must not be empty");
    }
    out = v.get<std::string>();
  }
  void integer(std::string_view key, int64_t lo, int64_t hi, int64_t& out) {
    if (!has(key)) return;
    const Json& v = at(key);
    if (!v.is_number_integer()) return problems_.add(path_of(key), "must be an integer");
    bool too_big = v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(hi);
    if (too_big || v.get<int64_t>() < lo || v.get<int64_t>() > hi) {
      return problems_.add(path_of(key), range_text(lo, hi));
    }
    out = v.get<int64_t>();
  }
  void integer(std::string_view key, int lo, int hi, int& out) {
    int64_t wide = out;
    integer(key, int64_t{lo}, int64_t{hi}, wide);
    out = static_cast<int>(wide);
  }
  void number(std::string_view key, double lo, double hi, double& out) {
    if (!has(key)) return;
    const Json& v = at(key);
    if (!v.is_number()) return problems_.add(path_of(key), "must be a number");
    double d = v.get<double>();
    if (!(d >= lo && d <= hi)) {
      return problems_.add(path_of(key), "must be " + fmt(lo) + ".." + fmt(hi));
    }
    out = d;
  }
  void boolean(std::string_view key, bool& out) {
    if (!has(key)) return;
    const Json& v = at(key);
    if (!v.is_boolean()) return problems_.add(path_of(key), "must be true or false");
    out = v.get<bool>();
  }
  void one_of(std::string_view key, std::initializer_list<std::string_view> values,
              std::string& out) {
    if (!has(key)) return;
    const Json& v = at(key);
    for (auto allowed : values) {
      if (v.is_string() && v.get_ref<const std::string&>() == allowed) {
        out = std::string(allowed);
        return;
      }
    }
    std::string list;
    for (auto allowed : values)
      list += (list.empty() ? "\"" : " | \"") + std::string(allowed) + "\"";
    problems_.add(path_of(key), "must be " + list);
  }
  // Returns a reader over the nested object `key`, or nullopt when absent or
  // not an object (reported).
  std::optional<ObjectReader> object(std::string_view key) {
    if (!has(key)) return std::nullopt;
    if (!at(key).is_object()) {
      problems_.add(path_of(key), "must be an object");
      return std::nullopt;
    }
    return ObjectReader(at(key), path_of(key), problems_);
  }
  void add(std::string_view key, const std::string& what) { problems_.add(path_of(key), what); }

 private:
  static std::string fmt(double d) {
    std::ostringstream out;
    out << d;
    return out.str();
  }

  const Json& object_;
  std::string path_;
  Problems& problems_;
};

void parse_slot(ObjectReader r, SlotConfig& slot) {
  r.only({"slot", "capacity", "product", "motor_line"});
  r.require("slot");
  r.require("capacity");
  r.integer("slot", 1, proto::kMaxSlot, slot.slot);
  r.integer("capacity", 1, proto::kMaxRestockCount, slot.capacity);
  r.text("product", slot.product, /*non_empty=*/false);
  r.integer("motor_line", 0, kMaxGpioLine, slot.motor_line);
}

void parse_slots(ObjectReader& root, std::vector<SlotConfig>& slots, Problems& problems) {
  root.require("slots");
  if (!root.has("slots")) return;
  const Json& array = root.at("slots");
  if (!array.is_array() || array.empty() || array.size() > size_t{proto::kMaxSlot}) {
    return root.add("slots",
                    "must be an array of 1.." + std::to_string(proto::kMaxSlot) + " slot objects");
  }
  std::map<int, size_t> seen;  // slot number -> index
  for (size_t i = 0; i < array.size(); ++i) {
    std::string path = "slots[" + std::to_string(i) + "]";
    if (!array[i].is_object()) {
      problems.add(path, "must be an object");
      continue;
    }
    SlotConfig slot;
    parse_slot(ObjectReader(array[i], path, problems), slot);
    if (slot.slot == 0) continue;  // already reported
    auto [it, fresh] = seen.emplace(slot.slot, i);
    if (!fresh) {
      problems.add(path + ".slot", "duplicate slot " + std::to_string(slot.slot) + " (also slots[" +
                                       std::to_string(it->second) + "])");
    }
    slots.push_back(slot);
  }
}

void parse_gpio(ObjectReader r, GpioConfig& gpio) {
  r.only({"chip", "drop_sensor_line", "drop_sensor_active_low", "motor_run_ms", "drop_window_ms"});
  r.text("chip", gpio.chip);
  r.integer("drop_sensor_line", 0, kMaxGpioLine, gpio.drop_sensor_line);
  r.boolean("drop_sensor_active_low", gpio.drop_sensor_active_low);
  r.integer("motor_run_ms", int64_t{50}, int64_t{60'000}, gpio.motor_run_ms);
  r.integer("drop_window_ms", int64_t{0}, int64_t{60'000}, gpio.drop_window_ms);
}

void parse_sim(ObjectReader r, SimulatedMachineOptions& sim) {
  r.only({"motor_run_ms", "jam_probability"});
  r.integer("motor_run_ms", int64_t{0}, int64_t{600'000}, sim.motor_run_ms);
  r.number("jam_probability", 0.0, 1.0, sim.jam_probability);
}

// The skew an agent that sends v1 commands tolerates on a dispense's expiry.
constexpr int64_t kV1AgentSkewMs = 5000;

void parse_core(ObjectReader r, CoreOptions& core) {
  r.only({"expiry_skew_ms", "dispense_queue_max", "motor_timeout_ms", "outbox_max",
          "outbox_drain_per_s", "outbox_window", "retransmit_ms", "reconnect_jitter_max_ms",
          "snapshot_interval_ms", "presence_interval_ms", "auto_confirm_restock",
          "accept_v1_commands"});
  r.integer("expiry_skew_ms", int64_t{0}, int64_t{3'600'000}, core.expiry_skew_ms);
  r.integer("dispense_queue_max", 1, 1000, core.dispense_queue_max);
  r.integer("motor_timeout_ms", int64_t{100}, int64_t{600'000}, core.motor_timeout_ms);
  r.integer("outbox_max", 10, 1'000'000, core.outbox_max);
  r.integer("outbox_drain_per_s", 1, 10'000, core.outbox_drain_per_s);
  r.integer("outbox_window", 1, 10'000, core.outbox_window);
  r.integer("retransmit_ms", int64_t{100}, int64_t{3'600'000}, core.retransmit_ms);
  r.integer("reconnect_jitter_max_ms", int64_t{0}, int64_t{600'000}, core.reconnect_jitter_max_ms);
  r.integer("snapshot_interval_ms", int64_t{0}, int64_t{86'400'000}, core.snapshot_interval_ms);
  if (core.snapshot_interval_ms > 0 && core.snapshot_interval_ms < 1000) {
    r.add("snapshot_interval_ms", "must be 0 (off) or 1000..86400000");
  }
  r.integer("presence_interval_ms", int64_t{0}, int64_t{86'400'000}, core.presence_interval_ms);
  r.boolean("auto_confirm_restock", core.auto_confirm_restock);
  r.boolean("accept_v1_commands", core.accept_v1_commands);
  // A v1 dispense is decided "never run" by the agent at expires_at_ms + 5 s:
  // the device must not run it later than that.
  if (core.accept_v1_commands && core.expiry_skew_ms > kV1AgentSkewMs) {
    r.add("expiry_skew_ms", "must be at most " + std::to_string(kV1AgentSkewMs) +
                                " with accept_v1_commands (the agent's tolerance)");
  }
}

void parse_update(ObjectReader r, UpdateConfig& update) {
  r.only({"public_key_file", "dir", "max_bytes", "health_bound_ms", "ca_file"});
  r.require("public_key_file");
  r.text("public_key_file", update.public_key_file);
  r.text("dir", update.dir);
  r.integer("max_bytes", int64_t{1024}, static_cast<int64_t>(proto::kMaxUpdateBytes),
            update.max_bytes);
  r.integer("health_bound_ms", int64_t{10'000}, int64_t{3'600'000}, update.health_bound_ms);
  r.text("ca_file", update.ca_file, /*non_empty=*/false);
}

void parse_connection(ObjectReader& r, DeviceConfig& c) {
  r.require("broker_url");
  r.text("broker_url", c.broker_url);
  bool tls = c.broker_url.rfind("ssl://", 0) == 0;
  if (!tls && c.broker_url.rfind("tcp://", 0) != 0) {
    r.add("broker_url", "must start with tcp:// or ssl://");
  } else if (c.broker_url.size() <= 6) {
    r.add("broker_url", "has no host");
  }
  r.text("username", c.username);
  r.text("password", c.password, /*non_empty=*/false);
  r.text("password_file", c.password_file);
  if (r.has("password") && !r.has("username")) r.add("password", "set without username");
  if (r.has("password_file") && !r.has("username")) r.add("password_file", "set without username");
  if (r.has("password") && r.has("password_file")) {
    r.add("password_file", "password and password_file exclude each other");
  }
  for (auto [key, out] : {std::pair<std::string_view, std::string*>{"tls_ca_file", &c.tls_ca_file},
                          {"tls_cert_file", &c.tls_cert_file},
                          {"tls_key_file", &c.tls_key_file}}) {
    r.text(key, *out);
    if (r.has(key) && !tls) r.add(key, "set but broker_url is not ssl://");
  }
  // The broker's certificate is always checked: name its CA (for a public CA,
  // the system bundle /etc/ssl/certs/ca-certificates.crt).
  if (tls && !r.has("tls_ca_file")) r.add("tls_ca_file", "required with ssl://");
  if (r.has("tls_cert_file") != r.has("tls_key_file")) {
    r.add(r.has("tls_cert_file") ? "tls_key_file" : "tls_cert_file",
          "tls_cert_file and tls_key_file go together");
  }
}

// Rules that span sections: the hardware named must be fully described, and
// the motor timeout must leave room for one rotation.
void check_hal(const DeviceConfig& c, Problems& problems) {
  int64_t rotation_ms = c.sim.motor_run_ms;
  std::string rotation_key = "sim.motor_run_ms";
  if (c.hal == "gpio") {
    rotation_ms = c.gpio.motor_run_ms + c.gpio.drop_window_ms;
    rotation_key = "gpio.motor_run_ms + gpio.drop_window_ms";
    if (c.gpio.drop_sensor_line < 0)
      problems.add("gpio.drop_sensor_line", "required when hal is gpio");
    std::map<int, std::string> used;
    if (c.gpio.drop_sensor_line >= 0) used[c.gpio.drop_sensor_line] = "gpio.drop_sensor_line";
    for (size_t i = 0; i < c.slots.size(); ++i) {
      std::string path = "slots[" + std::to_string(i) + "].motor_line";
      int line = c.slots[i].motor_line;
      if (line < 0) {
        problems.add(path, "required when hal is gpio");
      } else if (auto [it, fresh] = used.emplace(line, path); !fresh) {
        problems.add(path, "line " + std::to_string(line) + " already used by " + it->second);
      }
    }
  }
  if (c.core.motor_timeout_ms <= rotation_ms) {
    problems.add("core.motor_timeout_ms", "must be longer than one rotation (" + rotation_key +
                                              " = " + std::to_string(rotation_ms) + ")");
  }
}

// Relative file names in a config file are relative to that file, so a
// config directory can be moved as a whole.
void resolve_paths(DeviceConfig& c, const std::string& origin) {
  if (origin.empty()) return;
  fs::path base = fs::absolute(fs::path(origin)).parent_path();
  for (std::string* p :
       {&c.key_file, &c.password_file, &c.ledger_path, &c.tls_ca_file, &c.tls_cert_file,
        &c.tls_key_file, &c.update.public_key_file, &c.update.dir, &c.update.ca_file}) {
    if (!p->empty() && fs::path(*p).is_relative()) *p = (base / *p).lexically_normal().string();
  }
}

void parse_root(ObjectReader& r, DeviceConfig& c, Problems& problems) {
  r.only({"device_id", "key_file", "broker_url", "username", "password", "password_file",
          "tls_ca_file", "tls_cert_file", "tls_key_file", "ledger_path", "synchronous", "slots",
          "hal", "sim", "gpio", "core", "update"});
  r.require("device_id");
  r.text("device_id", c.device_id);
  if (r.has("device_id") && !c.device_id.empty() && !proto::is_valid_id(c.device_id)) {
    r.add("device_id", "must be 1..64 chars of [A-Za-z0-9._-]");
  }
  r.require("key_file");
  r.text("key_file", c.key_file);
  parse_connection(r, c);
  r.text("ledger_path", c.ledger_path);
  r.one_of("synchronous", {"full", "normal"}, c.synchronous);
  parse_slots(r, c.slots, problems);
  r.one_of("hal", {"sim", "gpio"}, c.hal);
  if (auto sim = r.object("sim")) parse_sim(*sim, c.sim);
  if (auto gpio = r.object("gpio")) parse_gpio(*gpio, c.gpio);
  if (auto core = r.object("core")) parse_core(*core, c.core);
  if (auto update = r.object("update")) parse_update(*update, c.update);
}

// Parses JSON text, refusing duplicate keys (nlohmann would keep the last).
Result<Json> parse_json(const std::string& text) {
  std::vector<std::set<std::string>> open_objects;
  std::optional<std::string> duplicate;
  auto callback = [&](int /*depth*/, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) open_objects.emplace_back();
    if (event == Json::parse_event_t::object_end) open_objects.pop_back();
    if (event == Json::parse_event_t::key && !open_objects.empty() &&
        !open_objects.back().insert(parsed.get<std::string>()).second && !duplicate) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  try {
    Json json = Json::parse(text, callback, /*allow_exceptions=*/true, /*ignore_comments=*/false);
    if (duplicate) return make_error(kBadConfig, "duplicate key \"" + *duplicate + "\"");
    return json;
  } catch (const Json::exception& e) {
    std::string what = e.what();
    auto pos = what.find("] ");
    return make_error(kBadConfig,
                      "invalid JSON: " + (pos == std::string::npos ? what : what.substr(pos + 2)));
  }
}

Error with_origin(const std::string& origin, const std::string& message) {
  return make_error(kBadConfig, origin.empty() ? message : origin + ": " + message);
}

}  // namespace

Result<DeviceConfig> parse_device_config(const std::string& text, const std::string& origin) {
  auto json = parse_json(text);
  if (!json.ok()) return with_origin(origin, json.error().message);
  if (!json->is_object()) return with_origin(origin, "(root): must be a JSON object");
  DeviceConfig config;
  Problems problems;
  ObjectReader root(*json, "", problems);
  parse_root(root, config, problems);
  if (!problems.any()) check_hal(config, problems);
  if (problems.any()) return with_origin(origin, problems.first());
  resolve_paths(config, origin);
  return config;
}

Result<DeviceConfig> load_device_config(const std::string& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) {
    return make_error(kBadConfig, path + ": no such file (or not a regular file)");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(kBadConfig, path + ": cannot be read");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(kBadConfig, path + ": read error");
  return parse_device_config(text.str(), path);
}

}  // namespace vend::fw
