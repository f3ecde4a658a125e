#include "motor_guard/guard_loop.hpp"

#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

// Everything here is async-signal-safe (system calls on the stack and on
// memory prepared before the fork): the parent may have had other threads,
// whose locks the child inherits held.
namespace vend::fw::guard {

namespace {

constexpr int64_t kNsPerS = 1'000'000'000;
constexpr int64_t kRetryOffNs = 1'000'000;  // a failed off-write is retried every 1 ms
constexpr int kOffAttemptsAtExit = 100;

int64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * kNsPerS + ts.tv_nsec;
}

// Returns the errno of a failed sched_setscheduler (0: none).
int32_t prepare_process(const Setup& s) noexcept {
  prctl(PR_SET_NAME, "vend-motorguard", 0, 0, 0);
  // Stop signals sent to the whole service must not cut a rotation short:
  // the daemon finishes it, then closes the socket.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGUSR1, SIGUSR2})
    sigaction(sig, &ignore, nullptr);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
  if (s.rt_priority <= 0) return 0;
  sched_param param{};
  param.sched_priority = s.rt_priority;
  return sched_setscheduler(0, SCHED_FIFO, &param) == 0 ? 0 : errno;
}

void all_off(const Setup& s) noexcept {
  for (size_t i = 0; i < s.count; ++i) {
    for (int attempt = 0; attempt < kOffAttemptsAtExit && !s.lines[i]->set(false); ++attempt) {
      timespec pause{0, kRetryOffNs};
      nanosleep(&pause, nullptr);
    }
  }
}

// Switches off the lines whose off-write is due (a deadline, or a failed
// write retried); returns the nearest one still due (0: none).
int64_t expire(const Setup& s, int64_t now) noexcept {
  int64_t next = 0;
  for (size_t i = 0; i < s.count; ++i) {
    LineState& st = s.states[i];
    if (st.off_at_ns == 0) continue;
    if (now >= st.off_at_ns) {
      st.on = false;
      st.off_at_ns = s.lines[i]->set(false) ? 0 : now + kRetryOffNs;
    }
    if (st.off_at_ns != 0 && (next == 0 || st.off_at_ns < next)) next = st.off_at_ns;
  }
  return next;
}

int32_t failed_write() noexcept { return errno != 0 ? errno : EIO; }

int32_t apply(const Setup& s, const Request& r) noexcept {
  if (r.line >= s.count) return EINVAL;
  GuardLine& line = *s.lines[r.line];
  LineState& st = s.states[r.line];
  if (r.active != 0) {
    if (st.on) return 0;  // already on: its deadline stands
    if (!line.set(true)) {
      int32_t err = failed_write();
      st.off_at_ns = now_ns();  // may be half-set: off at once, retried until it holds
      return err;
    }
    st.on = true;
    st.off_at_ns = now_ns() + s.max_on_ns;
    return 0;
  }
  st.on = false;
  if (!line.set(false)) {
    int32_t err = failed_write();
    st.off_at_ns = now_ns() + kRetryOffNs;
    return err;
  }
  st.off_at_ns = 0;
  return 0;
}

// Waits for a request until `deadline_ns` (0: no deadline). False when the
// socket reached end-of-file or failed: the daemon is gone.
bool serve_one(const Setup& s, int64_t deadline_ns) noexcept {
  pollfd pfd{s.channel, POLLIN, 0};
  timespec wait{};
  if (deadline_ns != 0) {
    int64_t left = deadline_ns - now_ns();
    if (left < 0) left = 0;
    wait = timespec{static_cast<time_t>(left / kNsPerS), static_cast<long>(left % kNsPerS)};
  }
  int ready = ppoll(&pfd, 1, deadline_ns != 0 ? &wait : nullptr, nullptr);
  if (ready < 0) return errno == EINTR;
  if (ready == 0) return true;  // a deadline, handled by the caller
  Request request{};
  ssize_t got = recv(s.channel, &request, sizeof request, 0);
  if (got == 0) return false;  // end-of-file: every copy of the daemon's end is closed
  if (got < 0) return errno == EINTR || errno == EAGAIN;
  Reply reply{got == sizeof request ? apply(s, request) : EINVAL};
  ssize_t sent = send(s.channel, &reply, sizeof reply, MSG_NOSIGNAL);
  return sent == sizeof reply || (sent < 0 && errno == EINTR);
}

}  // namespace

void run(const Setup& s) noexcept {
  Reply ready{prepare_process(s)};
  bool serving = send(s.channel, &ready, sizeof ready, MSG_NOSIGNAL) == sizeof ready;
  while (serving && serve_one(s, expire(s, now_ns()))) {
  }
  all_off(s);
  _exit(serving ? 0 : 1);
}

}  // namespace vend::fw::guard
