// The MQTT password file of the device config; like the device key and the
// TLS client key it must be private to its owner (vend/file_modes.hpp).
#include <fstream>
#include <sstream>

#include "vend/file_modes.hpp"
#include "vend/fw/config.hpp"

namespace vend::fw {

Status load_password_file(DeviceConfig& config) {
  if (config.password_file.empty()) return {};
  const std::string& path = config.password_file;
  if (auto s = check_secret_file(path, "password file", "bad_config"); !s.ok()) return s;
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("bad_config", "cannot read password file " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string password = ss.str();
  // One line: a trailing newline (as `echo` writes) is not part of it.
  if (!password.empty() && password.back() == '\n') password.pop_back();
  if (!password.empty() && password.back() == '\r') password.pop_back();
  if (password.find('\n') != std::string::npos) {
    return make_error("bad_config", "password file " + path + " has more than one line");
  }
  config.password = std::move(password);
  return {};
}

}  // namespace vend::fw
