// Helpers for tests: temp dirs, free ports, child processes, and real
// mosquitto / redis-server instances on loopback. A server that cannot be
// found or started throws, which fails the test: it never silently passes.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace vend::test {

// A fresh directory under $TMPDIR, removed recursively on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A TCP port on 127.0.0.1 that was free a moment ago.
int free_port();
// True once something accepts TCP connections on 127.0.0.1:port.
bool wait_for_port(int port, std::chrono::milliseconds timeout);
// Absolute path of program `name`, found on PATH or in /usr/sbin, /usr/bin.
// When missing, throws std::runtime_error naming the Debian package that
// provides it (scripts/setup-deps installs every one), which fails the test:
//   "`ss` not found: install Debian package iproute2 (scripts/setup-deps)"
std::string require_program(const std::string& name, const std::string& package);
// $VEND_BINARY_DIR/<relative> (set by ctest), for the project's executables.
std::string binary_path(const std::string& relative);

// A child process. Killed (SIGKILL) and reaped on destruction if still running.
class Child {
 public:
  // Starts argv[0] with the given args; stdout/stderr go to `log_path` when
  // not empty (appended).
  Child(std::vector<std::string> argv, const std::string& log_path = "");
  ~Child();
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  void signal(int sig);
  // Waits for exit; returns the exit status (128+signal when killed), or -1 on timeout.
  int wait(std::chrono::milliseconds timeout);
  void kill_now();

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  bool reaped_ = false;
};

// mosquitto on 127.0.0.1:<free port>, with TCP_NODELAY on, no persistence,
// and optional extra config lines. Stopped on destruction.
class MosquittoServer {
 public:
  explicit MosquittoServer(const std::string& extra_config = "");
  int port() const { return port_; }
  std::string url() const { return "tcp://127.0.0.1:" + std::to_string(port_); }
  // Stop and start again on the same port (broker outage).
  void stop();
  void start();

 private:
  TempDir dir_;
  int port_;
  std::string extra_;
  std::unique_ptr<Child> child_;
};

// redis-server on 127.0.0.1:<free port>, no persistence. Stopped on destruction.
class RedisServer {
 public:
  RedisServer();
  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  void stop();
  void start();

 private:
  TempDir dir_;
  int port_;
  std::unique_ptr<Child> child_;
};

// PostgreSQL 15 (Debian's postgresql-15) on 127.0.0.1:<free port>: initdb
// into a temp dir (user "vend", password "pg-secret-4711" over TCP, scram),
// fsync on, sockets in the temp dir. PostgreSQL refuses to run as root: as
// root, the temp dir is handed to the `postgres` system user and every
// server program runs as it (setpriv). Throws (failing the test) when it
// cannot be started. Stopped (fast shutdown) on destruction.
class PostgresServer {
 public:
  PostgresServer();
  ~PostgresServer();
  PostgresServer(const PostgresServer&) = delete;
  PostgresServer& operator=(const PostgresServer&) = delete;
  int port() const { return port_; }
  // A new empty database `name` (letters, digits, '_').
  void create_database(const std::string& name);
  // Runs `statement` in `database` with psql; throws when it fails.
  void sql(const std::string& database, const std::string& statement);
  // The same, returning what psql printed (unaligned, no headers).
  std::string query(const std::string& database, const std::string& statement);
  // postgresql://vend:pg-secret-4711@127.0.0.1:<port>/<database>
  std::string url(const std::string& database) const;
  void stop();
  void start();

 private:
  std::vector<std::string> as_server_user(std::vector<std::string> argv) const;
  int run(std::vector<std::string> argv, const std::string& log) const;
  TempDir dir_;
  int port_;
  std::unique_ptr<Child> child_;
};

// The error of `r` as text, "" when it holds a value. For REQUIRE_MESSAGE:
// doctest evaluates the message of a passing assertion too (with -s), where
// r.error() would be a bad_variant_access.
template <class R>
std::string error_text(const R& r) {
  return r.ok() ? std::string() : r.error().to_string();
}

// Whether process `pid`, a child of this process or not, has ended: gone,
// or a zombie its parent has not reaped yet (its /proc/PID/stat state is
// Z). Reads /proc rather than using PR_SET_CHILD_SUBREAPER, which
// qemu-user does not pass on.
bool process_ended(pid_t pid);

// Reads a whole file ("" if missing).
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);
// write_file, then mode 0600: a secret (device key, password) vend-firmware accepts.
void write_private_file(const std::string& path, const std::string& content);

}  // namespace vend::test
