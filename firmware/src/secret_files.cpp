// The MQTT password file of the device config; like the device key and the
// TLS client key it must be private to its owner (vend/secret_file.hpp).
#include "vend/fw/config.hpp"
#include "vend/secret_file.hpp"

namespace vend::fw {

Status load_password_file(DeviceConfig& config) {
  if (config.password_file.empty()) return {};
  auto password = read_secret_line(config.password_file, "password file", "bad_config");
  if (!password.ok()) return password.error();
  config.password = std::move(password).value();
  return {};
}

}  // namespace vend::fw
