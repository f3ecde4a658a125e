// vend-agent: the cloud agent. Everything process-related is in the shell
// (shell*.cpp); the HTTP adapter in http_*.cpp; the logic in vend_agent.
#include <iostream>
#include <string>
#include <vector>

#include "shell/shell.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return vend::agent::run_cli(args, std::cout, std::cerr);
}
