// vendctl: the operator's command line (docs/operations.md).
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "vend/ctl/args.hpp"

#ifndef VEND_VERSION
#define VEND_VERSION "0.0.0"
#endif

namespace {

int run(int argc, char** argv) {
  using namespace vend::ctl;
  std::vector<std::string> args(argv + 1, argv + argc);
  auto options = parse_args(args);
  if (!options.ok()) {
    std::cerr << "vendctl: " << options.error().message << " (see vendctl --help)\n";
    return kExitUsage;
  }
  for (const std::string& w : options->warnings) std::cerr << "vendctl: warning: " << w << "\n";
  switch (options->command) {
    case CommandKind::kHelp: std::cout << usage(); return kExitOk;
    case CommandKind::kVersion: std::cout << "vendctl " << VEND_VERSION << "\n"; return kExitOk;
    case CommandKind::kWatch: return run_watch(*options, std::cout, std::cerr);
    default: return run_http_command(*options, std::cout, std::cerr);
  }
}

}  // namespace

// An exception that reaches here is a failure nothing above expected (out of
// memory, a library's own error): one line and exit 1, never a core dump.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "vendctl: " << e.what() << "\n";
    return vend::ctl::kExitApiError;
  }
}
