// The vend-agent config file (--config FILE): its lines, not their meaning.
// parse_options() (shell_options.cpp) gives each entry to the same option
// table as the command line, so every option is a key of the file.
//
//   # a comment; blank lines are ignored
//   mqtt = ssl://broker.example:8883
//   operator-token-file = /var/lib/vend-agent/operator-token   # comment
//
// A key is a long option name without "--"; the value runs to the end of
// the line or to a '#' after whitespace, surrounding whitespace trimmed.
#pragma once

#include <string>
#include <vector>

#include "vend/result.hpp"

namespace vend::agent {

struct ConfigEntry {
  std::string key;
  std::string value;  // may be empty: the option table refuses that
  int line = 0;       // 1-based
};

// Reads and splits FILE. Refused (code "bad_usage", the message starts with
// the path, and "path:line:" for a bad line): a file that cannot be read, one
// writable by group or others (vend/file_modes.hpp), one over 64 KiB, a line
// with no '=', a key that does not start with a-z or has other characters
// than a-z, 0-9 and '-'.
Result<std::vector<ConfigEntry>> read_config_file(const std::string& path);

}  // namespace vend::agent
