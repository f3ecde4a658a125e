#include "update/boot_marker.hpp"

#include <array>
#include <utility>

namespace vend::fw {

namespace {

constexpr std::array<std::pair<BootMarker::State, const char*>, 5> kStates = {{
    {BootMarker::State::kNone, "none"},
    {BootMarker::State::kPending, "pending"},
    {BootMarker::State::kGood, "good"},
    {BootMarker::State::kFailed, "failed"},
    {BootMarker::State::kRolledBack, "rolled_back"},
}};

Error bad(int line, const std::string& what) {
  return Error{"bad_marker", "line " + std::to_string(line) + ": " + what};
}

}  // namespace

const char* to_string(BootMarker::State state) {
  for (const auto& [s, name] : kStates) {
    if (s == state) return name;
  }
  return "none";
}

Result<BootMarker> parse_boot_marker(std::string_view text) {
  BootMarker m;
  int line_no = 0;
  bool has_state = false;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++line_no;
    if (line.empty()) continue;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) return bad(line_no, "no '=' in '" + std::string(line) + "'");
    std::string_view key = line.substr(0, eq);
    std::string value(line.substr(eq + 1));
    if (key == "state") {
      has_state = false;
      for (const auto& [s, name] : kStates) {
        if (value == name) {
          m.state = s;
          has_state = true;
        }
      }
      if (!has_state) return bad(line_no, "unknown state '" + value + "'");
    } else if (key == "update_id") {
      m.update_id = std::move(value);
    } else if (key == "version") {
      m.version = std::move(value);
    } else if (key == "previous_version") {
      m.previous_version = std::move(value);
    } else if (key == "reason") {
      m.reason = std::move(value);
    }
  }
  if (!has_state) return Error{"bad_marker", "no state line"};
  if (m.state != BootMarker::State::kGood && m.state != BootMarker::State::kNone &&
      m.version.empty()) {
    return Error{"bad_marker", std::string("a ") + to_string(m.state) + " marker without version"};
  }
  return m;
}

std::string format_boot_marker(const BootMarker& m) {
  return std::string("state=") + to_string(m.state) + "\nupdate_id=" + m.update_id +
         "\nversion=" + m.version + "\nprevious_version=" + m.previous_version +
         "\nreason=" + m.reason + "\n";
}

}  // namespace vend::fw
