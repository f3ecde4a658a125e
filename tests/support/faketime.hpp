// libfaketime (Debian package faketime) for end-to-end tests that run a real
// binary with its wall clock moved while its monotonic clock stays true.
//
// faketime_command(vars, argv): `/usr/bin/env` with libfaketimeMT preloaded,
// FAKETIME_DONT_FAKE_MONOTONIC=1, ASAN_OPTIONS extended so an ASan build
// accepts a preloaded library before its runtime, then `vars`
// ("FAKETIME=+360", "FAKETIME_TIMESTAMP_FILE=…"), then `argv`. Fails the
// test when the package is missing.
#pragma once

#include <doctest/doctest.h>
#include <glob.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace vend::test {

// The multithreaded libfaketime of this architecture.
inline std::string libfaketime() {
  require_program("faketime", "faketime");
  glob_t found{};
  std::string path;
  if (glob("/usr/lib/*/faketime/libfaketimeMT.so.1", 0, nullptr, &found) == 0 &&
      found.gl_pathc > 0) {
    path = found.gl_pathv[0];
  }
  globfree(&found);
  REQUIRE_MESSAGE(!path.empty(),
                  "libfaketimeMT.so.1 not found: install Debian package faketime "
                  "(scripts/setup-deps)");
  return path;
}

inline std::vector<std::string> faketime_command(const std::vector<std::string>& vars,
                                                 const std::vector<std::string>& argv) {
  const char* asan = std::getenv("ASAN_OPTIONS");
  std::vector<std::string> out = {require_program("env", "coreutils"),
                                  "LD_PRELOAD=" + libfaketime(), "FAKETIME_DONT_FAKE_MONOTONIC=1",
                                  std::string("ASAN_OPTIONS=") +
                                      (asan != nullptr ? std::string(asan) + ":" : "") +
                                      "verify_asan_link_order=0"};
  out.insert(out.end(), vars.begin(), vars.end());
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace vend::test
