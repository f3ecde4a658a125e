// vend-firmware: the device daemon and its operator commands. Everything is
// in the shell (src/shell/); the device logic is in vend_firmware.
#include <iostream>
#include <string>
#include <vector>

#include "shell/cli.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return vend::fw::run_cli(args, std::cout, std::cerr);
}
