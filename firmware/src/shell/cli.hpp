// The vend-firmware command line: parses arguments and runs the daemon or an
// operator subcommand. Bad arguments print the usage to `err` and give exit
// code 2.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace vend::fw {

// `args` excludes argv[0]. Returns the process exit code.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace vend::fw
