#include "shell/setup.hpp"

#include <filesystem>

#include "vend/tls_files.hpp"

namespace vend::fw {

int exit_code_for(const Error& error) {
  const std::string& c = error.code;
  return c == "bad_config" || c == "bad_key" || c == "usage" ? kExitUsage : kExitFailure;
}

namespace {

// Paho reads them only when it connects, in the background: a wrong file
// would fail every connect attempt instead of stopping the start.
Status check_tls_files(const DeviceConfig& c) {
  return vend::check_tls_files({c.tls_ca_file, c.tls_cert_file, c.tls_key_file},
                               {.ca = "tls_ca_file",
                                .cert = "tls_cert_file",
                                .key = "tls_key_file",
                                .code = "bad_config",
                                .key_code = "bad_key",
                                .secret_code = "bad_key"});
}

}  // namespace

Result<DeviceSetup> load_setup(const std::string& config_path, bool with_key) {
  auto config = load_device_config(config_path);
  if (!config.ok()) return config.error();
  DeviceSetup setup{std::move(config).value(), {}};
  if (with_key) {
    const DeviceConfig& c = setup.config;
    if (auto s = check_secret_file(c.key_file, "key file", "bad_key"); !s.ok()) return s.error();
    if (auto s = check_tls_files(c); !s.ok()) return s.error();
    if (auto s = load_password_file(setup.config); !s.ok()) return s.error();
    auto key = crypto::Key::load_file(setup.config.key_file);
    if (!key.ok()) return key.error();
    setup.key = std::move(key).value();
  }
  return setup;
}

sql::Sync sync_mode(const DeviceConfig& config) {
  return config.synchronous == "normal" ? sql::Sync::kNormal : sql::Sync::kFull;
}

Result<Ledger> open_ledger(const DeviceSetup& setup, const std::string& boot_id, bool must_exist) {
  const std::string& path = setup.config.ledger_path;
  std::error_code ec;
  if (must_exist && !std::filesystem::exists(path, ec)) {
    return make_error("no_ledger", "ledger '" + path +
                                       "' does not exist (the daemon or `vend-firmware "
                                       "restock` creates it)");
  }
  Identity identity{setup.config.device_id, setup.key, boot_id};
  return Ledger::open(path, std::move(identity), sync_mode(setup.config));
}

}  // namespace vend::fw
