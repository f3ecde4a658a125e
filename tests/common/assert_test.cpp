// VEND_ASSERT aborts with file, line and condition on stderr, in every build;
// VEND_DEBUG_ASSERT does not even evaluate its condition under NDEBUG.
#include "vend/assert.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

namespace {

// Runs `body` in a child with stderr on a pipe; returns what it wrote and
// sets `status` to its wait status.
template <typename F>
std::string run_child(F&& body, int& status) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    body();
    _exit(0);
  }
  close(fds[1]);
  std::string out;
  char buf[256];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return out;
}

}  // namespace

TEST_CASE("VEND_ASSERT aborts naming file, line and condition") {
  int status = 0;
  std::string err = run_child([] { VEND_ASSERT(1 + 1 == 3); }, status);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
  CHECK(err.find("assertion failed: ") != std::string::npos);
  CHECK(err.find("assert_test.cpp:") != std::string::npos);
  CHECK(err.find("1 + 1 == 3") != std::string::npos);
}

TEST_CASE("a VEND_ASSERT that holds does nothing") {
  int status = 0;
  std::string err = run_child([] { VEND_ASSERT(1 + 1 == 2); }, status);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(err.empty());
}

TEST_CASE("VEND_DEBUG_ASSERT is compiled out by NDEBUG, condition unevaluated") {
  int evaluated = 0;
  auto check = [&] { return ++evaluated > 0; };
  VEND_DEBUG_ASSERT(check());
#ifdef NDEBUG
  CHECK(evaluated == 0);
#else
  CHECK(evaluated == 1);
#endif
}
