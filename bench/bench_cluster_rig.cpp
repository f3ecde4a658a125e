#include "bench_cluster_rig.hpp"

#include <signal.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "bench_util.hpp"

namespace vend::bench {

using namespace std::chrono_literals;
using Json = nlohmann::json;

AgentCluster::AgentCluster(const test::TempDir& dir, std::string db, std::string broker,
                           std::string name, int n)
    : dir_(dir), db_(std::move(db)), broker_(std::move(broker)), name_(std::move(name)) {
  for (int i = 0; i < n; ++i) ports_.push_back(test::free_port());
  children_.resize(static_cast<size_t>(n));
}

AgentCluster::~AgentCluster() {
  for (size_t i = 0; i < children_.size(); ++i) {
    if (!children_[i] || !children_[i]->running()) continue;
    children_[i]->signal(SIGCONT);  // a paused one cannot handle SIGTERM
    (void)stop(i);
  }
}

Status AgentCluster::start(size_t i, std::chrono::seconds timeout) {
  std::string id = name_ + "-" + std::to_string(i);
  std::vector<std::string> argv = {project_binary("cloud-agent/vend-agent"),
                                   "--http",
                                   "127.0.0.1:" + std::to_string(ports_[i]),
                                   "--mqtt",
                                   broker_,
                                   "--db",
                                   db_,
                                   "--instance-id",
                                   id,
                                   "--operator-token-file",
                                   dir_.file("operator.token"),
                                   "--gateway-secret-file",
                                   dir_.file("gateway.secret"),
                                   "--log-level",
                                   "warn"};
  children_[i] = std::make_unique<test::Child>(argv, log_path(i));
  auto deadline = SteadyClock::now() + timeout;
  while (!healthy(i)) {
    if (!children_[i]->running() || SteadyClock::now() > deadline) {
      return make_error("bench_setup", id + " did not come up: " + test::read_file(log_path(i)));
    }
    std::this_thread::sleep_for(50ms);
  }
  return {};
}

void AgentCluster::kill9(size_t i) { children_[i]->kill_now(); }
void AgentCluster::pause(size_t i) { children_[i]->signal(SIGSTOP); }
void AgentCluster::resume(size_t i) { children_[i]->signal(SIGCONT); }

int AgentCluster::stop(size_t i) {
  auto& c = children_[i];
  if (!c || !c->running()) return 0;
  c->signal(SIGTERM);
  int code = c->wait(20s);
  if (code < 0) c->kill_now();
  return code;
}

bool AgentCluster::running(size_t i) const { return children_[i] && children_[i]->running(); }
pid_t AgentCluster::pid(size_t i) const { return children_[i] ? children_[i]->pid() : -1; }

std::string AgentCluster::log_path(size_t i) const {
  return dir_.file(name_ + "-" + std::to_string(i) + ".log");
}

bool AgentCluster::healthy(size_t i) const {
  httplib::Client c("127.0.0.1", ports_[i]);
  c.set_connection_timeout(0, 300'000);
  auto r = c.Get("/healthz");
  return r && r->status == 200;
}

httplib::Result AgentCluster::get(size_t i, const std::string& path,
                                  const std::string& token) const {
  httplib::Client c("127.0.0.1", ports_[i]);
  c.set_connection_timeout(0, 500'000);
  c.set_read_timeout(2, 0);
  return c.Get(path, {{"Authorization", "Bearer " + token}});
}

std::string AgentCluster::metrics(size_t i) const {
  httplib::Client c("127.0.0.1", ports_[i]);
  c.set_connection_timeout(0, 500'000);
  c.set_read_timeout(5, 0);
  auto r = c.Get("/metrics");
  return r && r->status == 200 ? r->body : std::string();
}

bool settled(const AgentCluster& a, const std::vector<size_t>& live, const std::string& token) {
  int total = 0, shards = -1;
  for (size_t i : live) {
    auto r = a.get(i, "/v1/cluster", token);
    if (!r || r->status != 200) return false;
    Json v = Json::parse(r->body, nullptr, false);
    if (v.is_discarded() || v["members"].size() != live.size()) return false;
    int held = v.value("shards_held", 0);
    if (held == 0) return false;
    total += held;
    shards = v.value("shard_count", 0);
  }
  return total == shards;
}

int owner_of(const AgentCluster& a, const std::string& device, const std::string& token) {
  for (size_t i = 0; i < a.size(); ++i) {
    auto r = a.get(i, "/v1/devices/" + device + "/slots", token);
    if (r && r->status == 200) return static_cast<int>(i);
  }
  return -1;
}

std::string order_via(const AgentCluster& a, size_t i, const std::string& device, int slot) {
  httplib::Client c("127.0.0.1", a.port(i));
  c.set_follow_location(true);
  c.set_connection_timeout(0, 500'000);
  c.set_read_timeout(2, 0);
  auto r =
      c.Post("/v1/orders", R"({"device":")" + device + R"(","slot":)" + std::to_string(slot) + "}",
             "application/json");
  if (!r || r->status != 201) return "";
  Json j = Json::parse(r->body, nullptr, false);
  return j.is_discarded() ? "" : j.value("id", "");
}

void cancel_via(const AgentCluster& a, size_t i, const std::string& order) {
  httplib::Client c("127.0.0.1", a.port(i));
  c.set_follow_location(true);
  c.set_read_timeout(2, 0);
  (void)c.Post("/v1/orders/" + order + "/cancel");
}

bool wait_for(const std::function<bool()>& done, std::chrono::seconds timeout) {
  auto deadline = SteadyClock::now() + timeout;
  while (!done()) {
    if (SteadyClock::now() > deadline) return false;
    std::this_thread::sleep_for(50ms);
  }
  return true;
}

}  // namespace vend::bench
