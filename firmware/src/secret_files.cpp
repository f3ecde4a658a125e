// Secret files of the device config: the device key, the MQTT password and
// the TLS client key. They must be private to their owner.
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "vend/fw/config.hpp"

namespace vend::fw {

namespace {

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

}  // namespace

Status check_secret_file(const std::string& path, const std::string& what,
                         const std::string& code) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return make_error(code, "cannot read " + what + " " + path + ": " + std::strerror(errno));
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return make_error(code, what + " " + path + " has mode " + octal_mode(st.st_mode) +
                                ": must not be readable by group or others (chmod 600)");
  }
  return {};
}

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
