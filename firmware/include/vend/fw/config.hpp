// Device configuration (/etc/vend/device.json): parsed strictly, every
// problem reported with the offending key.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim_hal/sim_hal.hpp"
#include "vend/file_modes.hpp"
#include "vend/result.hpp"

namespace vend::fw {

struct SlotConfig {
  int slot = 0;         // 1..255
  int capacity = 0;     // items the slot can hold, 1..1000
  std::string product;  // informational
  int motor_line = -1;  // GPIO line driving this slot's motor (hal "gpio")
};

struct GpioConfig {
  std::string chip = "gpiochip0";
  int drop_sensor_line = -1;
  bool drop_sensor_active_low = true;
  int64_t motor_run_ms = 1500;   // how long one rotation drives the motor
  int64_t drop_window_ms = 800;  // how long after the rotation a drop still counts
};

// Behaviour of the device core.
struct CoreOptions {
  // Clock skew tolerated on a v1 dispense's expires_at_ms. A v2 command
  // carries its hard bound (the agent's tolerance included): this is not
  // added to it.
  int64_t expiry_skew_ms = 5000;
  // v1 commands (from an agent before protocol v2: no expiry on commands
  // other than dispense, so a captured one could be replayed forever) are
  // refused unless this is set, for a fleet whose agent is not upgraded yet.
  bool accept_v1_commands = false;
  int dispense_queue_max = 8;              // accepted dispenses waiting for the motor
  int64_t motor_timeout_ms = 10000;        // a rotation longer than this is a jam
  int outbox_max = 10000;                  // events kept for the cloud
  int outbox_drain_per_s = 50;             // publish rate after a reconnect
  int outbox_window = 64;                  // published but unacknowledged events
  int64_t retransmit_ms = 10000;           // resend unacknowledged events after this
  int64_t reconnect_jitter_max_ms = 3000;  // drain start delay, derived from the id
  int64_t snapshot_interval_ms = 300000;   // periodic snapshot; 0 disables
  // Re-publish the retained `online` status this often while connected, so a
  // late last will of an old session cannot leave the device marked offline.
  int64_t presence_interval_ms = 60000;  // 0 disables
  bool auto_confirm_restock = false;     // load cloud restocks at once via Hal::loader (sim)
};

// Firmware updates over the air (docs/firmware.md, "Updates"). Off unless
// the `update` section names the update key's public half.
struct UpdateConfig {
  std::string public_key_file;               // 64 hex chars; "" = updates refused
  std::string dir = "/var/lib/vend/update";  // artifacts, kept packages, marker, requests
  int64_t max_bytes = 64ll * 1024 * 1024;    // largest artifact accepted
  int64_t health_bound_ms = 180'000;         // a new version must be healthy within this
  std::string ca_file;                       // HTTPS downloads: CA bundle ("" = the system's)
};

struct DeviceConfig {
  std::string device_id;
  std::string key_file;
  std::string broker_url;  // tcp://host:1883 or ssl://host:8883
  std::string username;
  std::string password;
  std::string password_file;  // the password in a file of its own (mode 0600); not with password
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string ledger_path = "/var/lib/vend/ledger.db";
  std::string synchronous = "full";  // full | normal
  std::vector<SlotConfig> slots;
  std::string hal = "sim";  // sim | gpio
  SimulatedMachineOptions sim;
  GpioConfig gpio;
  CoreOptions core;
  UpdateConfig update;
};

// Parses JSON config text. Errors have code "bad_config" and name the key,
// e.g. "slots[2].capacity: must be 1..1000". `origin` (a path) prefixes them.
Result<DeviceConfig> parse_device_config(const std::string& text, const std::string& origin);
// Reads and parses a file; a missing or unreadable file names the path.
Result<DeviceConfig> load_device_config(const std::string& path);

// The device key, the MQTT password and the TLS client key are checked with
// vend::check_secret_file (vend/file_modes.hpp).
// Reads `password_file` (when set) into `password` after checking its mode:
// one line, a trailing newline dropped. Errors: "bad_config".
Status load_password_file(DeviceConfig& config);

}  // namespace vend::fw
