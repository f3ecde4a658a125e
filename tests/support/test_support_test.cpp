// The test helpers' own contracts, where a test depends on their failure
// message: a program that is missing names the Debian package to install.
#include "test_support.hpp"

#include <doctest/doctest.h>

#include <string>

namespace vend::test {
namespace {

TEST_CASE("require_program returns the absolute path of a program on PATH") {
  std::string sh = require_program("sh", "dash");
  REQUIRE(sh.size() > 3);
  CHECK(sh.front() == '/');
  CHECK(sh.substr(sh.size() - 3) == "/sh");
}

TEST_CASE("require_program fails naming the Debian package of a missing program") {
  CHECK_THROWS_WITH(require_program("vend-no-such-program", "vend-some-package"),
                    "`vend-no-such-program` not found: install Debian package vend-some-package "
                    "(scripts/setup-deps)");
}

}  // namespace
}  // namespace vend::test
