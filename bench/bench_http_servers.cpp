// Benchmark #10 (docs/benchmarks.md, issue 13): the two HTTP server
// candidates side by side, in process, with the same handler: one that
// blocks 1 ms (as an AgentCore call waits for its group commit) and answers
// a small JSON object.
//
//   httplib   the agent's server until issue 13: cpp-httplib, 8 worker
//             threads, a keep-alive connection served by one thread until it
//             has been idle 2 s (the old configure_server() settings). This
//             is the baseline.
//   mhd       HttpServer (libmicrohttpd, epoll, suspend/resume) as shipped,
//             handlers on a 32-thread WorkerPool.
//
// Scenarios, each on a fresh server:
//   burst     100 customers, each on its own keep-alive connection opened
//             before, send one request at once: P99.
//   idle      1,000 keep-alive connections that each sent one request (its
//             answer left unread) stay open while 8 other customers send 200 requests/s for 2 s:
//             P99.
// Requests that get no answer within 10 s count as failed (and as 10 s).
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <iostream>
#include <memory>
#include <thread>

#include "bench_util.hpp"
#include "http/http_server.hpp"
#include "http/worker_pool.hpp"

namespace vend::bench {
namespace {

using agent::HttpReply;
using agent::HttpRequest;
using agent::HttpResponder;
constexpr const char* kBench = "bench_http_servers";
constexpr auto kCommit = std::chrono::milliseconds(1);

// One candidate on a loopback port; stops on destruction.
class Candidate {
 public:
  virtual ~Candidate() = default;
  virtual int port() const = 0;
};

class HttplibCandidate final : public Candidate {
 public:
  HttplibCandidate() {
    server_.new_task_queue = [] { return new httplib::ThreadPool(8); };
    server_.set_keep_alive_timeout(2);
    server_.set_read_timeout(5, 0);
    server_.set_tcp_nodelay(true);
    server_.Get("/x", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(kCommit);
      res.set_content(R"({"ok":true})", "application/json");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~HttplibCandidate() override {
    server_.stop();
    thread_.join();
  }
  int port() const override { return port_; }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

class MhdCandidate final : public Candidate {
 public:
  MhdCandidate() : pool_(32, 4096) {
    server_ = std::make_unique<agent::HttpServer>(
        agent::HttpServerLimits{},
        [this](HttpRequest&&, HttpResponder responder) {
          auto held = std::make_shared<HttpResponder>(std::move(responder));
          pool_.try_post([held] {
            std::this_thread::sleep_for(kCommit);
            held->complete(HttpReply{200, R"({"ok":true})"});
          });
        },
        clock_, log_);
    auto port = server_->bind("127.0.0.1", 0);
    port_ = port.ok() ? *port : 0;
    (void)server_->start();
  }
  ~MhdCandidate() override { server_->stop(); }
  int port() const override { return port_; }

 private:
  SystemClock clock_;
  NullLogger log_;
  agent::WorkerPool pool_;
  std::unique_ptr<agent::HttpServer> server_;
  int port_ = 0;
};

std::unique_ptr<httplib::Client> client_for(int port) {
  auto c = std::make_unique<httplib::Client>("127.0.0.1", port);
  c->set_keep_alive(true);
  c->set_read_timeout(10, 0);
  c->set_tcp_nodelay(true);
  return c;
}

double p99_ms(const std::vector<int64_t>& samples_us) {
  std::vector<double> ms;
  for (int64_t us : samples_us) ms.push_back(static_cast<double>(us) / 1000.0);
  return percentile(std::move(ms), 99);
}

struct Outcome {
  double p99_ms = 0;
  int64_t failed = 0;
};

// One latency sample per request, 10 s for one that failed.
int64_t timed_get(httplib::Client& c, int64_t t0, std::atomic<int64_t>& failed) {
  auto r = c.Get("/x");
  if (!r || r->status != 200) {
    ++failed;
    return 10'000'000;
  }
  return (now_ns() - t0) / 1000;
}

Outcome burst(const Candidate& server, int customers) {
  std::vector<int64_t> lat(static_cast<size_t>(customers));
  std::atomic<int64_t> failed{0};
  std::barrier start(customers);
  std::vector<std::thread> threads;
  for (int i = 0; i < customers; ++i) {
    threads.emplace_back([&, i] {
      auto c = client_for(server.port());
      c->Get("/x");  // connected, and kept open
      start.arrive_and_wait();
      lat[static_cast<size_t>(i)] = timed_get(*c, now_ns(), failed);
    });
  }
  for (auto& t : threads) t.join();
  return {p99_ms(lat), failed.load()};
}

Outcome idle_then_paced(const Candidate& server, int idle_n, double rate, double seconds) {
  // Raw sockets: each sends one keep-alive request and never closes (its
  // answer is left unread, as a phone in a pocket would).
  std::vector<int> idle;
  const std::string req = "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  for (int i = 0; i < idle_n; ++i) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(server.port()));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) break;
    (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
    idle.push_back(fd);
  }
  constexpr int kClients = 8;
  std::vector<std::vector<int64_t>> lat(kClients);
  std::atomic<int64_t> failed{0};
  int64_t end = now_ns() + static_cast<int64_t>(seconds * 1e9);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      auto c = client_for(server.port());
      auto period = static_cast<int64_t>(kClients / rate * 1e9);
      // Bounded: after a late answer the missed send times are not sent.
      for (int64_t next = now_ns() + period * i / kClients; now_ns() < end; next += period) {
        std::this_thread::sleep_for(std::chrono::nanoseconds(next - now_ns()));
        lat[static_cast<size_t>(i)].push_back(timed_get(*c, next, failed));
      }
    });
  }
  for (auto& t : threads) t.join();
  std::vector<int64_t> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  for (int fd : idle) ::close(fd);
  return {p99_ms(all), failed.load()};
}

template <typename C>
std::pair<Outcome, Outcome> measure(int idle_n) {
  Outcome b, i;
  {
    C server;
    b = burst(server, 100);
  }
  {
    C server;
    i = idle_then_paced(server, idle_n, 200, 2.0);
  }
  return {b, i};
}

}  // namespace
}  // namespace vend::bench

int main(int argc, char** argv) {
  using namespace vend::bench;
  Options opt = parse_options(argc, argv, kBench);
  Report report(kBench, opt);
  int idle_n = static_cast<int>(scaled(opt, 1000, 50));
  std::vector<double> h_burst, m_burst, h_idle, m_idle, h_failed, m_failed;
  for (int run = 0; run < opt.runs; ++run) {
    auto [hb, hi] = measure<HttplibCandidate>(idle_n);
    auto [mb, mi] = measure<MhdCandidate>(idle_n);
    progress(kBench, "run " + std::to_string(run + 1) + ": burst P99 httplib " +
                         std::to_string(hb.p99_ms) + " ms, mhd " + std::to_string(mb.p99_ms) +
                         " ms; with idle P99 httplib " + std::to_string(hi.p99_ms) + " ms (" +
                         std::to_string(hi.failed) + " failed), mhd " + std::to_string(mi.p99_ms) +
                         " ms (" + std::to_string(mi.failed) + " failed)");
    h_burst.push_back(hb.p99_ms), m_burst.push_back(mb.p99_ms);
    h_idle.push_back(hi.p99_ms), m_idle.push_back(mi.p99_ms);
    h_failed.push_back(static_cast<double>(hb.failed + hi.failed));
    m_failed.push_back(static_cast<double>(mb.failed + mi.failed));
  }
  std::string idle = std::to_string(idle_n);
  report.add("mhd_burst_100_keepalive_p99_ms", "ms", m_burst, Better::kLower);
  report.add("baseline_httplib_burst_100_keepalive_p99_ms", "ms", h_burst, Better::kLower);
  report.add("mhd_p99_ms_with_" + idle + "_idle", "ms", m_idle, Better::kLower);
  report.add("baseline_httplib_p99_ms_with_" + idle + "_idle", "ms", h_idle, Better::kLower);
  report.add("mhd_failed_requests", "requests", m_failed, Better::kLower);
  report.add("baseline_httplib_failed_requests", "requests", h_failed, Better::kLower);
  report.compare("mhd_burst_100_keepalive_p99_ms", "baseline_httplib_burst_100_keepalive_p99_ms");
  report.compare("mhd_p99_ms_with_" + idle + "_idle",
                 "baseline_httplib_p99_ms_with_" + idle + "_idle");
  report.note(
      "in process, loopback; handler = 1 ms blocking wait + small JSON; httplib: 8 threads, "
      "keep-alive 2 s (the agent's old settings); mhd: HttpServer defaults + 32 workers");
  report.note("burst: 100 keep-alive customers, one request each at once; idle: " + idle +
              " idle keep-alive connections + 200 requests/s from 8 customers for 2 s; no "
              "answer in 10 s = failed, counted as 10 s");
  return report.finish();
}
