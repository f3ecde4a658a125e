#include "bench_agent_rig.hpp"

#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench_util.hpp"
#include "live/live_http.hpp"
#include "live/live_machine.hpp"
#include "vend/crypto.hpp"
#include "vend/webhook.hpp"

namespace vend::bench {

namespace {

using namespace std::chrono_literals;
using Json = nlohmann::json;

std::string trimmed_file(const std::string& path) {
  std::string s = test::read_file(path);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

bool agent_ready(int port) {
  httplib::Client client("127.0.0.1", port);
  client.set_connection_timeout(0, 300'000);
  auto res = client.Get("/healthz");
  return res && res->status == 200 &&
         res->body.find("\"mqtt_connected\":true") != std::string::npos;
}

sim::AgentEndpoint endpoint_of(const FleetTarget& target) {
  sim::AgentEndpoint e;
  e.port = target.http_port;
  e.operator_token = target.operator_token;
  e.gateway_secret = target.gateway_secret;
  for (int port : target.more_ports) e.more.push_back(sim::AgentAddress{"127.0.0.1", port});
  return e;
}

}  // namespace

// ---- AgentServer -------------------------------------------------------------

Result<std::unique_ptr<AgentServer>> AgentServer::start(
    const std::vector<std::string>& agent_args) {
  std::unique_ptr<AgentServer> s(new AgentServer());
  s->http_port_ = test::free_port();
  std::vector<std::string> argv = {project_binary("cloud-agent/vend-agent"),
                                   "--http",
                                   "127.0.0.1:" + std::to_string(s->http_port_),
                                   "--mqtt",
                                   s->broker_.url(),
                                   "--db",
                                   s->dir_.file("agent.db"),
                                   "--operator-token-file",
                                   s->dir_.file("operator.token"),
                                   "--gateway-secret-file",
                                   s->dir_.file("gateway.secret"),
                                   "--log-level",
                                   "warn"};
  argv.insert(argv.end(), agent_args.begin(), agent_args.end());
  std::string log = s->dir_.file("agent.log");
  s->agent_ = std::make_unique<test::Child>(argv, log);
  auto deadline = SteadyClock::now() + 20s;
  while (!agent_ready(s->http_port_)) {
    if (!s->agent_->running() || SteadyClock::now() > deadline) {
      return make_error("bench_setup", "vend-agent did not come up: " + test::read_file(log));
    }
    std::this_thread::sleep_for(50ms);
  }
  s->operator_token_ = trimmed_file(s->dir_.file("operator.token"));
  s->gateway_secret_ = trimmed_file(s->dir_.file("gateway.secret"));
  return s;
}

AgentServer::~AgentServer() { stop_agent(); }

int AgentServer::stop_agent() {
  if (!agent_ || !agent_->running()) return agent_ ? agent_->wait(0ms) : 0;
  agent_->signal(SIGTERM);
  int code = agent_->wait(20s);
  if (code == -1) agent_->kill_now();
  return code;
}

std::string AgentServer::metrics() const {
  httplib::Client client("127.0.0.1", http_port_);
  auto res = client.Get("/metrics");
  return res && res->status == 200 ? res->body : std::string();
}

FleetTarget AgentServer::target() const {
  return FleetTarget{http_port_, broker_.url(), operator_token_, gateway_secret_, dir_.path(), true,
                     {}};
}

// ---- Fleet -------------------------------------------------------------------

Fleet::Fleet(FleetSpec spec, FleetTarget target)
    : spec_(std::move(spec)), server_(std::move(target)) {}

Result<std::unique_ptr<Fleet>> Fleet::start(const FleetSpec& spec, const AgentServer& server,
                                            Logger& log) {
  return start(spec, server.target(), log);
}

Result<std::unique_ptr<Fleet>> Fleet::start(const FleetSpec& spec, FleetTarget target,
                                            Logger& log) {
  std::unique_ptr<Fleet> fleet(new Fleet(spec, std::move(target)));
  if (Status s = fleet->provision_and_boot(log); !s.ok()) return s.error();
  fleet->run_ = true;
  size_t threads = static_cast<size_t>(std::max(1, spec.step_threads));
  threads = std::min(threads, fleet->machines_.size());
  for (size_t t = 0; t < threads; ++t) {
    fleet->steppers_.emplace_back([f = fleet.get(), t, threads] { f->step_loop(t, threads); });
  }
  if (Status s = fleet->wait_online(30s); !s.ok()) return s.error();
  return fleet;
}

Status Fleet::provision_and_boot(Logger& log) {
  sim::AgentClient client(endpoint_of(server_));
  for (int i = 0; i < spec_.machines; ++i) {
    char id[64];
    std::snprintf(id, sizeof id, "%s-%03d", spec_.prefix.c_str(), i + 1);
    std::vector<sim::SlotDef> defs;
    std::vector<fw::SlotConfig> slots;
    for (int s = 1; s <= spec_.slots; ++s) {
      defs.push_back({s, "product-" + std::to_string(s), 100, spec_.capacity});
      slots.push_back({s, spec_.capacity, "product-" + std::to_string(s), -1});
    }
    auto key_hex = client.provision(id, defs);
    if (!key_hex.ok()) return key_hex.error();
    auto key = crypto::Key::from_hex(*key_hex);
    if (!key.ok()) return key.error();
    fw::CoreOptions core;
    core.auto_confirm_restock = true;
    core.reconnect_jitter_max_ms = 0;
    core.dispense_queue_max = 64;  // a burst of paid orders waits instead of being refused
    core.snapshot_interval_ms = 0;
    sim::LiveMachineSetup setup{id,
                                *key,
                                server_.ledger_dir + "/" + id + ".ledger.db",
                                server_.broker_url,
                                slots,
                                core,
                                fw::SimulatedMachineOptions{spec_.motor_run_ms, 0.0},
                                0.0,
                                static_cast<uint64_t>(i) * 7919 + 1};
    machines_.push_back(std::make_unique<sim::LiveMachine>(std::move(setup), log));
    if (Status s = machines_.back()->boot(); !s.ok()) return s;
    ids_.push_back(id);
  }
  std::vector<std::future<Status>> connects;  // in parallel: a Paho connect can take a while
  for (auto& m : machines_) {
    connects.push_back(std::async(std::launch::async, [&m] { return m->connect_blocking(); }));
  }
  Status first_error;
  for (auto& f : connects) {
    Status s = f.get();
    if (!s.ok() && first_error.ok()) first_error = s;
  }
  return first_error;
}

void Fleet::step_loop(size_t first, size_t stride) {
  while (run_) {
    if (!paused_) {
      for (size_t i = first; i < machines_.size(); i += stride) machines_[i]->step();
    }
    std::this_thread::sleep_for(std::chrono::microseconds(spec_.tick_us));
  }
}

int Fleet::online() const {
  int n = 0;
  for (const auto& m : machines_) n += m->online() ? 1 : 0;
  return n;
}

Status Fleet::wait_online(std::chrono::seconds timeout) {
  HttpCustomer op(server_.http_port, server_.gateway_secret, server_.operator_token);
  auto deadline = SteadyClock::now() + timeout;
  while (!server_.wait_online) {
    if (online() == static_cast<int>(machines_.size())) return {};
    if (SteadyClock::now() > deadline) {
      return make_error("bench_setup", std::to_string(online()) + " of " +
                                           std::to_string(machines_.size()) +
                                           " machines connected");
    }
    std::this_thread::sleep_for(100ms);
  }
  for (;;) {
    auto r = op.get("/v1/devices", true);
    Json j = Json::parse(r.body, nullptr, false);
    size_t up = 0;
    if (!j.is_discarded() && j.contains("devices")) {
      for (const auto& d : j["devices"]) up += d.value("online", false) ? 1 : 0;
    }
    if (up == machines_.size()) return {};
    if (SteadyClock::now() > deadline) {
      return make_error("bench_setup", std::to_string(up) + " of " +
                                           std::to_string(machines_.size()) + " machines online");
    }
    std::this_thread::sleep_for(100ms);
  }
}

Status Fleet::fill(int count, std::chrono::seconds timeout) {
  sim::AgentClient client(endpoint_of(server_));
  for (const auto& id : ids_) {
    for (int s = 1; s <= spec_.slots; ++s) {
      if (Status st = client.restock(id, s, count); !st.ok()) return st;
    }
  }
  auto deadline = SteadyClock::now() + timeout;
  for (const auto& id : ids_) {
    for (;;) {
      auto slots = client.slots(id);
      if (!slots.ok()) return slots.error();
      bool full = std::all_of(slots->begin(), slots->end(),
                              [count](const sim::SlotReply& r) { return r.pool >= count; });
      if (full) break;
      if (SteadyClock::now() > deadline) {
        return make_error("bench_setup", id + ": pools not filled in time");
      }
      std::this_thread::sleep_for(50ms);
    }
  }
  return {};
}

Fleet::~Fleet() {
  run_ = false;
  for (auto& t : steppers_) t.join();
  std::vector<std::future<void>> stops;
  for (auto& m : machines_) {
    stops.push_back(std::async(std::launch::async, [&m] { m->stop(); }));
  }
  for (auto& f : stops) f.wait();
  machines_.clear();
}

// ---- HttpCustomer ------------------------------------------------------------

namespace {
uint64_t next_customer() {
  static std::atomic<uint64_t> n{0};
  return ++n;
}
}  // namespace

HttpCustomer::HttpCustomer(int port, std::string gateway_secret, std::string operator_token)
    : client_(std::make_unique<httplib::Client>("127.0.0.1", port)),
      gateway_secret_(std::move(gateway_secret)),
      bearer_("Bearer " + operator_token),
      shopper_prefix_("shopper-" + std::to_string(next_customer()) + "-") {
  client_->set_keep_alive(true);
  client_->set_connection_timeout(2, 0);
  client_->set_read_timeout(10, 0);
  client_->set_tcp_nodelay(true);
}

HttpCustomer::~HttpCustomer() = default;

namespace {
HttpCustomer::Reply reply_of(const httplib::Result& res) {
  if (!res) return {};
  return {res->status, res->body};
}
}  // namespace

HttpCustomer::Reply HttpCustomer::create_order(const std::string& device, int slot) {
  std::string body = R"({"device":")" + device + R"(","slot":)" + std::to_string(slot) + "}";
  httplib::Headers headers{{"X-Client-Id", shopper_prefix_ + std::to_string(++orders_)}};
  return reply_of(client_->Post("/v1/orders", headers, body, "application/json"));
}

SignedPayment signed_payment(const std::string& gateway_secret, const std::string& order_id,
                             const std::string& payment_id, int64_t amount_cents) {
  std::string body = R"({"payment_id":")" + payment_id + R"(","amount_cents":)" +
                     std::to_string(amount_cents) + "}";
  int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  std::string signature = webhook::sign(gateway_secret, now_s, order_id, body);
  return {std::move(body), std::move(signature)};
}

HttpCustomer::Reply HttpCustomer::pay(const std::string& order_id, const std::string& payment_id,
                                      int64_t amount_cents) {
  SignedPayment p = signed_payment(gateway_secret_, order_id, payment_id, amount_cents);
  httplib::Headers headers{{webhook::kHeader, p.signature}};
  return reply_of(
      client_->Post("/v1/orders/" + order_id + "/payment", headers, p.body, "application/json"));
}

HttpCustomer::Reply HttpCustomer::get(const std::string& path, bool as_operator) {
  httplib::Headers headers;
  if (as_operator) headers.emplace("Authorization", bearer_);
  return reply_of(client_->Get(path, headers));
}

HttpCustomer::Reply HttpCustomer::post(const std::string& path) {
  return reply_of(client_->Post(path));
}

// ---- helpers -----------------------------------------------------------------

std::string json_string(const std::string& body, const std::string& field) {
  Json j = Json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains(field) || !j[field].is_string()) return "";
  return j[field].get<std::string>();
}

double metric_value(const std::string& text, const std::string& series) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    if (text.compare(pos, series.size(), series) == 0 && pos + series.size() < end &&
        text[pos + series.size()] == ' ') {
      return std::atof(text.c_str() + pos + series.size() + 1);
    }
    pos = end + 1;
  }
  return 0;
}

double cpu_seconds(pid_t pid) {
  std::string stat = test::read_file("/proc/" + std::to_string(pid) + "/stat");
  size_t paren = stat.rfind(')');  // the command name may hold spaces
  if (paren == std::string::npos) return 0;
  std::istringstream in(stat.substr(paren + 2));
  std::string field;
  double utime = 0, stime = 0;
  for (int i = 3; i <= 15 && in >> field; ++i) {  // fields 14, 15: utime, stime
    if (i == 14) utime = std::atof(field.c_str());
    if (i == 15) stime = std::atof(field.c_str());
  }
  return (utime + stime) / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

double percentile_ms(const std::vector<int64_t>& samples_us, double p) {
  std::vector<double> ms;
  ms.reserve(samples_us.size());
  for (int64_t us : samples_us) ms.push_back(static_cast<double>(us) / 1000.0);
  return percentile(std::move(ms), p);
}

}  // namespace vend::bench
