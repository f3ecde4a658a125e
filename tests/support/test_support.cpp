#include "test_support.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace vend::test {

namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string base = fs::temp_directory_path().string() + "/vend-test-XXXXXX";
  std::vector<char> buf(base.begin(), base.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + base);
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    throw std::runtime_error("bind() to a free port failed");
  }
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

bool wait_for_port(int port, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

std::string require_program(const std::string& name, const std::string& package) {
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/bin:/usr/local/sbin";
  std::stringstream ss(path);
  std::string dir;
  while (std::getline(ss, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  throw std::runtime_error("`" + name + "` not found: install Debian package " + package +
                           " (scripts/setup-deps)");
}

std::string binary_path(const std::string& relative) {
  const char* dir = std::getenv("VEND_BINARY_DIR");
  if (dir == nullptr) throw std::runtime_error("VEND_BINARY_DIR not set (run through ctest)");
  return std::string(dir) + "/" + relative;
}

Child::Child(std::vector<std::string> argv, const std::string& log_path) {
  if (argv.empty()) throw std::runtime_error("Child: empty argv");
  pid_ = fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    setpgid(0, 0);
    if (!log_path.empty()) {
      int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
      }
    }
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
}

Child::~Child() {
  if (!reaped_) kill_now();
}

bool Child::running() {
  if (reaped_) return false;
  int status = 0;
  pid_t r = waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return false;
  }
  return true;
}

void Child::signal(int sig) {
  if (!reaped_) ::kill(pid_, sig);
}

int Child::wait(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (running()) {
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return status_;
}

void Child::kill_now() {
  if (reaped_) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  reaped_ = true;
  status_ = 128 + SIGKILL;
}

MosquittoServer::MosquittoServer(const std::string& extra_config)
    : port_(free_port()), extra_(extra_config) {
  start();
}

void MosquittoServer::start() {
  std::string conf = dir_.file("mosquitto.conf");
  std::ofstream out(conf);
  out << "listener " << port_ << " 127.0.0.1\n"
      << "allow_anonymous true\n"
      << "set_tcp_nodelay true\n"
      << "persistence false\n"
      << "max_queued_messages 100000\n"
      << "log_dest stderr\n"
      << extra_ << "\n";
  out.close();
  child_ = std::make_unique<Child>(
      std::vector<std::string>{require_program("mosquitto", "mosquitto"), "-c", conf},
      dir_.file("broker.log"));
  if (!wait_for_port(port_, std::chrono::seconds(10))) {
    throw std::runtime_error("mosquitto did not start on port " + std::to_string(port_) + ": " +
                             read_file(dir_.file("broker.log")));
  }
}

void MosquittoServer::stop() { child_.reset(); }

RedisServer::RedisServer() : port_(free_port()) { start(); }

void RedisServer::start() {
  child_ = std::make_unique<Child>(
      std::vector<std::string>{require_program("redis-server", "redis-server"), "--port",
                               std::to_string(port_), "--bind", "127.0.0.1", "--save", "",
                               "--appendonly", "no", "--dir", dir_.path()},
      dir_.file("redis.log"));
  if (!wait_for_port(port_, std::chrono::seconds(10))) {
    throw std::runtime_error("redis-server did not start on port " + std::to_string(port_) + ": " +
                             read_file(dir_.file("redis.log")));
  }
}

void RedisServer::stop() { child_.reset(); }

namespace {

constexpr const char* kPgBin = "/usr/lib/postgresql/15/bin/";

std::string pg_program(const std::string& name) {
  std::string path = kPgBin + name;
  if (access(path.c_str(), X_OK) != 0) {
    throw std::runtime_error("`" + path + "` not found: install Debian package postgresql-15 " +
                             "(scripts/setup-deps)");
  }
  return path;
}

}  // namespace

std::vector<std::string> PostgresServer::as_server_user(std::vector<std::string> argv) const {
  if (geteuid() != 0) return argv;
  std::vector<std::string> out = {require_program("setpriv", "util-linux"), "--reuid=postgres",
                                  "--regid=postgres", "--init-groups", "--"};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

int PostgresServer::run(std::vector<std::string> argv, const std::string& log) const {
  Child child(as_server_user(std::move(argv)), log);
  return child.wait(std::chrono::seconds(120));
}

PostgresServer::PostgresServer() : port_(free_port()) {
  if (geteuid() == 0) {
    passwd* pw = getpwnam("postgres");
    if (pw == nullptr) {
      throw std::runtime_error(
          "no `postgres` system user to run PostgreSQL as (root may not): "
          "install Debian package postgresql-15 (scripts/setup-deps)");
    }
    for (const auto& entry : fs::recursive_directory_iterator(dir_.path())) {
      (void)chown(entry.path().c_str(), pw->pw_uid, pw->pw_gid);
    }
    if (chown(dir_.path().c_str(), pw->pw_uid, pw->pw_gid) != 0) {
      throw std::runtime_error("cannot hand " + dir_.path() + " to the postgres user");
    }
  }
  write_file(dir_.file("pwfile"), "pg-secret-4711\n");
  if (geteuid() == 0) {
    passwd* pw = getpwnam("postgres");
    (void)chown(dir_.file("pwfile").c_str(), pw->pw_uid, pw->pw_gid);
  }
  int rc = run({pg_program("initdb"), "-D", dir_.file("data"), "-U", "vend",
                "--pwfile=" + dir_.file("pwfile"), "--auth-local=trust",
                "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C.UTF-8"},
               dir_.file("initdb.log"));
  if (rc != 0) {
    throw std::runtime_error("initdb failed (exit " + std::to_string(rc) +
                             "): " + read_file(dir_.file("initdb.log")));
  }
  start();
}

PostgresServer::~PostgresServer() { stop(); }

void PostgresServer::start() {
  child_ = std::make_unique<Child>(
      as_server_user({pg_program("postgres"), "-D", dir_.file("data"), "-p", std::to_string(port_),
                      "-k", dir_.path(), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c",
                      "synchronous_commit=on", "-c", "max_connections=40", "-c",
                      "shared_buffers=32MB"}),
      dir_.file("postgres.log"));
  if (!wait_for_port(port_, std::chrono::seconds(30))) {
    throw std::runtime_error("postgres did not listen on 127.0.0.1:" + std::to_string(port_) +
                             ": " + read_file(dir_.file("postgres.log")));
  }
  // Listening comes before accepting sessions: wait for a real one.
  for (int attempt = 0; attempt < 100; ++attempt) {
    if (run({pg_program("pg_isready"), "-q", "-h", dir_.path(), "-p", std::to_string(port_)}, "") ==
        0) {
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("postgres on port " + std::to_string(port_) +
                           " never became ready: " + read_file(dir_.file("postgres.log")));
}

void PostgresServer::stop() {
  if (!child_) return;
  child_->signal(SIGINT);  // fast shutdown: a checkpoint, then exit
  if (child_->wait(std::chrono::seconds(20)) < 0) child_->kill_now();
  child_.reset();
}

void PostgresServer::create_database(const std::string& name) {
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') {
      throw std::runtime_error("bad database name " + name);
    }
  }
  sql("postgres", "CREATE DATABASE " + name);
}

void PostgresServer::sql(const std::string& database, const std::string& statement) {
  int rc = run({pg_program("psql"), "-q", "-v", "ON_ERROR_STOP=1", "-h", dir_.path(), "-p",
                std::to_string(port_), "-U", "vend", "-d", database, "-c", statement},
               dir_.file("psql.log"));
  if (rc != 0) {
    throw std::runtime_error("psql " + statement + " failed: " + read_file(dir_.file("psql.log")));
  }
}

std::string PostgresServer::query(const std::string& database, const std::string& statement) {
  const std::string out = dir_.file("query.log");
  std::filesystem::remove(out);  // Child appends
  int rc = run({pg_program("psql"), "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", dir_.path(),
                "-p", std::to_string(port_), "-U", "vend", "-d", database, "-c", statement},
               out);
  if (rc != 0) throw std::runtime_error("psql " + statement + " failed: " + read_file(out));
  return read_file(out);
}

std::string PostgresServer::url(const std::string& database) const {
  return "postgresql://vend:pg-secret-4711@127.0.0.1:" + std::to_string(port_) + "/" + database;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
}

void write_private_file(const std::string& path, const std::string& content) {
  write_file(path, content);
  std::filesystem::permissions(
      path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write,
      std::filesystem::perm_options::replace);
}

bool process_ended(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  // "PID (name) STATE ...": the name may hold spaces and parentheses.
  size_t name_end = line.rfind(')');
  return name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'Z';
}

}  // namespace vend::test
