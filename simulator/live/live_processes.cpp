#include "live/live_processes.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

namespace vend::sim {

namespace {

int wait_status(int raw) { return WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw); }

bool http_ready(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(std::chrono::milliseconds(300));
  auto res = client.Get("/healthz");
  // Connected to the broker too: the fleet starts talking only then.
  return res && res->status == 200 &&
         res->body.find("\"mqtt_connected\":true") != std::string::npos;
}

}  // namespace

Result<std::unique_ptr<ChildProcess>> ChildProcess::start(const std::vector<std::string>& argv,
                                                          const std::string& log_path) {
  int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return make_error("launch", "cannot open log '" + log_path + "'");
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(log);
    return make_error("launch", "fork failed for " + argv[0]);
  }
  if (pid == 0) {
    ::dup2(log, 1);
    ::dup2(log, 2);
    ::setpgid(0, 0);  // a Ctrl-C of the terminal reaches vend-sim only; it stops us
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(log);
  return std::unique_ptr<ChildProcess>(new ChildProcess(pid));
}

ChildProcess::~ChildProcess() { stop(std::chrono::milliseconds(3000)); }

bool ChildProcess::running() {
  if (reaped_) return false;
  int raw = 0;
  if (::waitpid(pid_, &raw, WNOHANG) == pid_) {
    reaped_ = true;
    status_ = wait_status(raw);
  }
  return !reaped_;
}

int ChildProcess::stop(std::chrono::milliseconds grace) {
  if (!running()) return status_;
  ::kill(pid_, SIGTERM);
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (running() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (running()) {
    ::kill(pid_, SIGKILL);
    int raw = 0;
    ::waitpid(pid_, &raw, 0);
    reaped_ = true;
    status_ = wait_status(raw);
  }
  return status_;
}

Result<int> free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return make_error("launch", "socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  if (port <= 0) return make_error("launch", "no free loopback port");
  return port;
}

bool wait_for_port(int port, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

Result<std::string> find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) {
    if (::access(name.c_str(), X_OK) == 0) return name;
    return make_error("launch", "'" + name + "' is not an executable");
  }
  std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  path += ":/usr/sbin:/usr/bin:/sbin:/bin";
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string candidate = path.substr(start, end - start) + "/" + name;
    if (end > start && ::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return make_error("launch", "'" + name + "' not found on PATH");
}

std::string self_dir() {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? "." : exe.parent_path().string();
}

Status launch_broker(const std::string& dir, const std::string& mosquitto_bin,
                     LaunchedServices& out) {
  auto bin = find_program(mosquitto_bin);
  if (!bin.ok()) return bin.error();
  auto port = free_loopback_port();
  if (!port.ok()) return port.error();
  std::string conf = dir + "/mosquitto.conf";
  std::ofstream(conf) << "listener " << *port << " 127.0.0.1\n"
                      << "allow_anonymous true\nset_tcp_nodelay true\npersistence false\n"
                      << "max_inflight_messages 1000\nmax_queued_messages 10000\n"
                      << "queue_qos0_messages false\n";
  auto child = ChildProcess::start({*bin, "-c", conf}, dir + "/mosquitto.log");
  if (!child.ok()) return child.error();
  out.mosquitto = std::move(child).value();
  out.mqtt_port = *port;
  if (!wait_for_port(*port, std::chrono::seconds(10))) {
    return make_error("launch", "mosquitto did not listen on port " + std::to_string(*port) +
                                    " (see " + dir + "/mosquitto.log)");
  }
  return {};
}

Status restart_agent(LaunchedServices& s) {
  if (s.agent) s.agent->stop();
  auto child = ChildProcess::start(s.agent_argv, s.agent_log);
  if (!child.ok()) return child.error();
  s.agent = std::move(child).value();
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    if (http_ready(s.http_port)) return {};
    if (!s.agent->running()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return make_error("launch", "vend-agent did not answer /healthz (see " + s.agent_log + ")");
}

Status launch_agent(const std::string& dir, const std::string& agent_bin, int64_t reservation_ttl_s,
                    int64_t dispatch_ttl_s, LaunchedServices& out) {
  std::string name = agent_bin;
  if (name.empty()) {
    std::string sibling = self_dir() + "/../cloud-agent/vend-agent";
    name = ::access(sibling.c_str(), X_OK) == 0 ? sibling : "vend-agent";
  }
  auto bin = find_program(name);
  if (!bin.ok()) return bin.error();
  auto port = free_loopback_port();
  if (!port.ok()) return port.error();
  out.http_port = *port;
  out.agent_log = dir + "/vend-agent.log";
  out.agent_argv = {*bin,
                    "--http",
                    "127.0.0.1:" + std::to_string(*port),
                    "--mqtt",
                    "tcp://127.0.0.1:" + std::to_string(out.mqtt_port),
                    "--db",
                    dir + "/agent.db",
                    "--operator-token-file",
                    dir + "/operator.token",
                    "--gateway-secret-file",
                    dir + "/gateway.secret",
                    "--reservation-ttl-s",
                    std::to_string(reservation_ttl_s),
                    "--dispatch-ttl-s",
                    std::to_string(dispatch_ttl_s),
                    "--log-level",
                    "warn"};
  return restart_agent(out);
}

}  // namespace vend::sim
