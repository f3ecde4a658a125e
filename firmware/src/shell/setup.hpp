// What the daemon and the operator commands share: reading the config and
// the key, and opening the ledger.
#pragma once

#include <string>

#include "vend/crypto.hpp"
#include "vend/fw/config.hpp"
#include "vend/fw/ledger.hpp"
#include "vend/result.hpp"

namespace vend::fw {

// Process exit codes of vend-firmware.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // runtime failure (ledger, broker, hardware)
inline constexpr int kExitUsage = 2;    // bad arguments, bad config, bad key: fix and retry

// kExitUsage for errors a retry cannot fix (bad_config, bad_key, usage),
// kExitFailure otherwise.
int exit_code_for(const Error& error);

struct DeviceSetup {
  DeviceConfig config;
  crypto::Key key;
};

// Loads the config and, when `with_key`, the key file it names and the
// password file, after checking that they and the TLS key file are private
// (check_secret_file) and that the TLS files parse (tls_files.hpp).
Result<DeviceSetup> load_setup(const std::string& config_path, bool with_key);

// Opens the ledger named by the config, signing as `boot_id`. With
// `must_exist`, a missing ledger file is an error instead of a new ledger.
Result<Ledger> open_ledger(const DeviceSetup& setup, const std::string& boot_id, bool must_exist);

sql::Sync sync_mode(const DeviceConfig& config);

}  // namespace vend::fw
