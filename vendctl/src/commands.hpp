// The commands of the vendctl executable: `watch` over MQTT (Paho) and the
// HTTP commands against the agent's API (cpp-httplib). Each returns the
// process exit code (vend/ctl/args.hpp) and writes its result to `out`, its
// problems to `err` as "vendctl: <code>: <message>".
#pragma once

#include <ostream>
#include <string>

#include "vend/ctl/args.hpp"
#include "vend/result.hpp"

namespace vend::ctl {

int run_watch(const CtlOptions& options, std::ostream& out, std::ostream& err);
int run_http_command(const CtlOptions& options, std::ostream& out, std::ostream& err);

// Reads a secret file (token, password), surrounding whitespace trimmed.
// Errors: "bad_usage" naming the file.
Result<std::string> read_secret_file(const std::string& path);

// Prints "vendctl: <code>: <message>" and returns the exit code of that
// error: "bad_usage" 2, "unreachable" 3, "no_report" 4, anything else 1.
int report_error(const Error& error, std::ostream& err);

}  // namespace vend::ctl
