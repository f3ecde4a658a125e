#include "vend/file_modes.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace vend {

namespace {

std::string octal_mode(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

// The mode of `path`, or an error naming `what` and the path.
Result<mode_t> mode_of(const std::string& path, const std::string& what, const std::string& code) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return make_error(code, "cannot read " + what + " " + path + ": " + std::strerror(errno));
  }
  return st.st_mode;
}

}  // namespace

Status check_secret_file(const std::string& path, const std::string& what,
                         const std::string& code) {
  auto mode = mode_of(path, what, code);
  if (!mode.ok()) return mode.error();
  if ((*mode & (S_IRWXG | S_IRWXO)) != 0) {
    return make_error(code, what + " " + path + " has mode " + octal_mode(*mode) +
                                ": must not be readable by group or others (chmod 600)");
  }
  return {};
}

Status check_config_file_mode(const std::string& path, const std::string& what,
                              const std::string& code) {
  auto mode = mode_of(path, what, code);
  if (!mode.ok()) return mode.error();
  if ((*mode & (S_IWGRP | S_IWOTH)) != 0) {
    return make_error(code, what + " " + path + " has mode " + octal_mode(*mode) +
                                ": must not be writable by group or others (chmod 644)");
  }
  return {};
}

}  // namespace vend
