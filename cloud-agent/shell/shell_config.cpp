#include "shell/shell_config.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "vend/file_modes.hpp"

namespace vend::agent {

namespace {

// Far above any real config (every option with a long path is ~4 KiB): a
// bigger file is the wrong file.
constexpr std::streamsize kMaxConfigBytes = 64 * 1024;

std::string trim(const std::string& s) {
  const char* ws = " \t\r";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// The line without its comment: '#' at the start or after whitespace.
std::string strip_comment(const std::string& line) {
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
      return line.substr(0, i);
    }
  }
  return line;
}

bool valid_key(const std::string& key) {
  if (key.empty() || key[0] < 'a' || key[0] > 'z') return false;
  for (char c : key) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

Result<std::string> read_small_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("bad_usage", path + ": cannot read: " + std::strerror(errno));
  std::string text(static_cast<size_t>(kMaxConfigBytes) + 1, '\0');
  in.read(text.data(), kMaxConfigBytes + 1);
  if (in.bad()) return make_error("bad_usage", path + ": cannot read: " + std::strerror(errno));
  if (in.gcount() > kMaxConfigBytes) {
    return make_error("bad_usage", path + ": larger than 64 KiB, not a vend-agent config");
  }
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

}  // namespace

Result<std::vector<ConfigEntry>> read_config_file(const std::string& path) {
  if (Status s = check_config_file_mode(path, "config file", "bad_usage"); !s.ok()) {
    return s.error();
  }
  auto text = read_small_file(path);
  if (!text.ok()) return text.error();
  std::vector<ConfigEntry> entries;
  std::istringstream lines(*text);
  std::string raw;
  for (int number = 1; std::getline(lines, raw); ++number) {
    std::string line = trim(strip_comment(raw));
    if (line.empty()) continue;
    std::string where = path + ":" + std::to_string(number) + ": ";
    size_t eq = line.find('=');
    if (eq == std::string::npos) {
      return make_error("bad_usage",
                        where.append("expected 'key = value', got '").append(line).append("'"));
    }
    std::string key = trim(line.substr(0, eq));
    if (!valid_key(key)) {
      return make_error("bad_usage",
                        where.append("bad key '")
                            .append(key)
                            .append("' (a long option name without '--', e.g. 'mqtt')"));
    }
    entries.push_back({key, trim(line.substr(eq + 1)), number});
  }
  return entries;
}

}  // namespace vend::agent
