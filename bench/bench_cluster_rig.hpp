// Several vend-agent instances on one PostgreSQL database and one broker, as
// child processes with --instance-id and the shipped lease defaults, and the
// HTTP probes the cluster benchmarks (bench_cluster, bench_fleet_scale) make
// of them: settled shards, a machine's owner, an order through a redirect.
#pragma once

#include <httplib.h>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "vend/result.hpp"

namespace vend::bench {

// Instances "<name>-0".."<name>-<n-1>" on free loopback ports, restartable
// on the same port. The operator token and gateway secret are read from
// `dir`'s operator.token and gateway.secret. Non-copyable; SIGTERM (then
// SIGKILL after 20 s) to each running one on destruction.
class AgentCluster {
 public:
  AgentCluster(const test::TempDir& dir, std::string db, std::string broker, std::string name,
               int n);
  ~AgentCluster();
  AgentCluster(const AgentCluster&) = delete;
  AgentCluster& operator=(const AgentCluster&) = delete;

  // Starts instance i and waits (up to `timeout`) for its /healthz.
  Status start(size_t i, std::chrono::seconds timeout = std::chrono::seconds(30));
  void kill9(size_t i);
  // SIGSTOP / SIGCONT: a process that stops answering without dying.
  void pause(size_t i);
  void resume(size_t i);
  // SIGTERM; the exit code (-1: had to be killed after 20 s).
  int stop(size_t i);
  bool running(size_t i) const;

  size_t size() const { return ports_.size(); }
  int port(size_t i) const { return ports_[i]; }
  pid_t pid(size_t i) const;
  std::string log_path(size_t i) const;
  bool healthy(size_t i) const;
  // GET as the operator, not following redirects; a null result when no answer.
  httplib::Result get(size_t i, const std::string& path, const std::string& token) const;
  // The instance's /metrics text ("" when it does not answer).
  std::string metrics(size_t i) const;

 private:
  const test::TempDir& dir_;
  std::string db_, broker_, name_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<test::Child>> children_;
};

// Every shard owned by a live instance and each of `live` holding some.
bool settled(const AgentCluster& a, const std::vector<size_t>& live, const std::string& token);

// Which instance serves `device` now: the one that answers its slots with
// 200 (the others redirect to it). -1 when none does.
int owner_of(const AgentCluster& a, const std::string& device, const std::string& token);

// One order on `device` slot `slot` through instance `i`, following its
// redirect; the order id on a 201, "" otherwise. Short timeouts: the
// redirect may point at an instance just killed until its lease expires.
std::string order_via(const AgentCluster& a, size_t i, const std::string& device, int slot = 1);
void cancel_via(const AgentCluster& a, size_t i, const std::string& order);

// Polls done() every 50 ms until it holds (true) or `timeout` passed (false).
bool wait_for(const std::function<bool()>& done, std::chrono::seconds timeout);

}  // namespace vend::bench
