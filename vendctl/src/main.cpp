// vendctl: the operator's command line (docs/operations.md).
#include <iostream>
#include <string>
#include <vector>

#include "commands.hpp"
#include "vend/ctl/args.hpp"

#ifndef VEND_VERSION
#define VEND_VERSION "0.0.0"
#endif

int main(int argc, char** argv) {
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
