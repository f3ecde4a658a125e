#include "vend/secret_file.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "vend/file_modes.hpp"

namespace vend {

Result<std::string> read_secret_line(const std::string& path, const std::string& what,
                                     const std::string& code, size_t max_bytes) {
  if (Status s = check_secret_file(path, what, code); !s.ok()) return s.error();
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(code, what + " " + path + ": cannot read: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string secret = ss.str();
  if (!secret.empty() && secret.back() == '\n') secret.pop_back();
  if (!secret.empty() && secret.back() == '\r') secret.pop_back();
  if (secret.empty() || secret.size() > max_bytes) {
    return make_error(code,
                      what + " " + path + ": must hold 1.." + std::to_string(max_bytes) + " bytes");
  }
  if (secret.find_first_of("\r\n") != std::string::npos) {
    return make_error(code, what + " " + path + ": must be one line");
  }
  return secret;
}

}  // namespace vend
