#include "motor_guard/motor_guard.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "motor_guard/guard_loop.hpp"

namespace vend::fw {

namespace {

constexpr const char* kLog = "motor-guard";
constexpr int kAnswerTimeoutMs = 1000;
constexpr auto kExitWait = std::chrono::seconds(1);

Error guard_error(const std::string& what) { return make_error("motor_guard", what); }

std::string errno_text(int err) { return std::strerror(err); }

std::string describe_exit(int status) {
  if (WIFSIGNALED(status)) return "killed by signal " + std::to_string(WTERMSIG(status));
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

// Below every other process for the OOM killer (a root daemon may lower it;
// elsewhere the guard's tiny private memory still makes it a poor victim).
void protect_from_oom(pid_t pid, Logger& log) {
  std::string path = "/proc/" + std::to_string(pid) + "/oom_score_adj";
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  bool ok = fd >= 0 && write(fd, "-1000", 5) == 5;
  int err = errno;
  if (fd >= 0) close(fd);
  if (!ok) log.info(kLog, "OOM score of the guard not lowered (" + errno_text(err) + ")");
}

// `sched_error`: what the guard's own sched_setscheduler() returned.
void log_policy(int rt_priority, int32_t sched_error, Logger& log) {
  if (rt_priority <= 0) return;
  log.info(kLog, sched_error == 0
                     ? "guard at SCHED_FIFO priority " + std::to_string(rt_priority)
                     : "guard at normal priority (no SCHED_FIFO: " + errno_text(sched_error) + ")");
}

}  // namespace

Result<std::unique_ptr<MotorGuard>> MotorGuard::spawn(const std::vector<GuardLine*>& lines,
                                                      int64_t max_on_ms, int rt_priority,
                                                      Logger& log) {
  if (max_on_ms <= 0) {
    return guard_error("a rotation's longest time must be positive, not " +
                       std::to_string(max_on_ms) + " ms");
  }
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds) != 0) {
    return guard_error("cannot create the motor guard's socket: " + errno_text(errno));
  }
  // Everything the child uses is prepared here: after fork() it allocates nothing.
  std::vector<guard::LineState> states(lines.size());
  guard::Setup setup{fds[1],       lines.data(),          states.data(),
                     lines.size(), max_on_ms * 1'000'000, rt_priority};
  pid_t pid = fork();
  if (pid < 0) {
    int err = errno;
    close(fds[0]);
    close(fds[1]);
    return guard_error("cannot fork the motor guard: " + errno_text(err));
  }
  if (pid == 0) {
    close(fds[0]);  // else the guard would hold the daemon's end open and never see its death
    guard::run(setup);
  }
  close(fds[1]);
  std::unique_ptr<MotorGuard> g(new MotorGuard(pid, fds[0], lines.size(), log));
  // The guard's first record says it serves (and how it is scheduled).
  auto ready = g->await_reply();
  if (!ready.ok()) return ready.error();  // the destructor stops and reaps it
  protect_from_oom(pid, log);
  log_policy(rt_priority, *ready, log);
  log.info(kLog, "motor guard (pid " + std::to_string(pid) + ") holds " +
                     std::to_string(lines.size()) + " motor lines, each on for at most " +
                     std::to_string(max_on_ms) + " ms");
  return g;
}

MotorGuard::MotorGuard(pid_t pid, int channel, size_t lines, Logger& log)
    : pid_(pid), channel_(channel), lines_(lines), log_(log) {}

MotorGuard::~MotorGuard() {
  std::lock_guard lock(mu_);
  close(channel_);  // end-of-file: the guard switches every line off and exits
  auto until = std::chrono::steady_clock::now() + kExitWait;
  int status = 0;
  while (!reaped_) {
    pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno != EINTR)) break;
    if (std::chrono::steady_clock::now() >= until) {
      log_.error(kLog, "motor guard (pid " + std::to_string(pid_) + ") did not exit: killed");
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

Error MotorGuard::broken(const std::string& why) {
  if (broken_.empty()) {
    broken_ = "motor guard (pid " + std::to_string(pid_) + ") " + why;
    log_.error(kLog, broken_);
  }
  return guard_error(broken_);
}

Status MotorGuard::set(size_t index, bool active) {
  std::lock_guard lock(mu_);
  if (!broken_.empty()) return guard_error(broken_);
  if (index >= lines_) return guard_error("no motor line " + std::to_string(index));
  guard::Request request{static_cast<uint32_t>(index), active ? 1u : 0u};
  ssize_t sent;
  do {
    sent = send(channel_, &request, sizeof request, MSG_NOSIGNAL);
  } while (sent < 0 && errno == EINTR);
  if (sent != sizeof request) return broken("is gone (" + errno_text(errno) + ")");
  auto error = await_reply();
  if (!error.ok()) return error.error();
  if (*error != 0) return make_error("gpio_error", "motor guard: " + errno_text(*error));
  return {};
}

Result<int32_t> MotorGuard::await_reply() {
  pollfd pfd{channel_, POLLIN, 0};
  int ready;
  do {
    ready = poll(&pfd, 1, kAnswerTimeoutMs);
  } while (ready < 0 && errno == EINTR);
  if (ready == 0) {
    return broken("did not answer within " + std::to_string(kAnswerTimeoutMs) + " ms");
  }
  guard::Reply reply{};
  ssize_t got = recv(channel_, &reply, sizeof reply, 0);
  if (got == 0) return broken("is gone");
  if (got != sizeof reply) return broken("answered badly (" + errno_text(errno) + ")");
  return reply.error;
}

Status MotorGuard::check() {
  std::lock_guard lock(mu_);
  if (!reaped_) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      reaped_ = true;
      broken_.clear();  // the exit says more than a failed request did
      broken(describe_exit(status));
    }
  }
  if (!broken_.empty()) return guard_error(broken_);
  return {};
}

}  // namespace vend::fw
