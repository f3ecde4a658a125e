#include "event_customers.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "bench_agent_rig.hpp"
#include "bench_util.hpp"
#include "vend/webhook.hpp"

namespace vend::bench {

struct EventCustomers::Conn {
  int fd = -1;
  std::string in;   // bytes of the answer being read
  std::string out;  // the request being written
  size_t out_off = 0;
  bool done = false;  // its script said "" (or its connection failed)
  std::vector<Exchange> answers;
};

namespace {

// A complete answer at the front of `in`: its length, status and body.
// 0 when more bytes are needed; -1 when the head cannot be parsed.
long parse_answer(const std::string& in, int& status, std::string& body) {
  size_t head_end = in.find("\r\n\r\n");
  if (head_end == std::string::npos) return 0;
  if (in.compare(0, 5, "HTTP/") != 0) return -1;
  size_t sp = in.find(' ');
  if (sp == std::string::npos || sp + 4 > head_end) return -1;
  status = std::atoi(in.c_str() + sp + 1);
  size_t length = 0;
  for (size_t line = in.find("\r\n"); line < head_end; line = in.find("\r\n", line + 2)) {
    constexpr const char* kName = "content-length:";
    if (::strncasecmp(in.c_str() + line + 2, kName, std::strlen(kName)) == 0) {
      length = std::strtoul(in.c_str() + line + 2 + std::strlen(kName), nullptr, 10);
    }
  }
  size_t total = head_end + 4 + length;
  if (in.size() < total) return 0;
  body.assign(in, head_end + 4, length);
  return static_cast<long>(total);
}

}  // namespace

std::string http_request(const std::string& method, const std::string& path,
                         const std::vector<std::string>& headers, const std::string& body) {
  std::string r = method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  for (const std::string& h : headers) r += h + "\r\n";
  if (!body.empty()) {
    r +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  }
  r += "\r\n";
  r += body;
  return r;
}

std::string payment_request(const std::string& gateway_secret, const std::string& order_id,
                            const std::string& payment_id, int64_t amount_cents) {
  SignedPayment p = signed_payment(gateway_secret, order_id, payment_id, amount_cents);
  return http_request("POST", "/v1/orders/" + order_id + "/payment",
                      {std::string(webhook::kHeader) + ": " + p.signature}, p.body);
}

Result<EventCustomers> EventCustomers::connect(int port, size_t customers) {
  EventCustomers ec;
  ec.epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (ec.epoll_fd_ < 0) return Error{"io", std::string("epoll_create1: ") + strerror(errno)};
  ec.conns_.resize(customers);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (size_t c = 0; c < customers; ++c) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
      return Error{"io", "customer " + std::to_string(c) + ": socket: " + strerror(errno)};
    ec.conns_[c].fd = fd;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      return Error{"io", "customer " + std::to_string(c) + ": connect: " + strerror(errno)};
    }
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = c;
    if (::epoll_ctl(ec.epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Error{"io", "customer " + std::to_string(c) + ": epoll_ctl: " + strerror(errno)};
    }
  }
  const std::string healthz = http_request("GET", "/healthz");
  auto warm = ec.run(
      [&](size_t, const std::vector<Exchange>& answers) { return answers.empty() ? healthz : ""; },
      20'000);
  for (size_t c = 0; c < customers; ++c) {
    if (warm[c].empty() || warm[c][0].status != 200) {
      return Error{"io", "customer " + std::to_string(c) + ": GET /healthz got " +
                             std::to_string(warm[c].empty() ? 0 : warm[c][0].status)};
    }
  }
  return ec;
}

EventCustomers::EventCustomers(EventCustomers&& o) noexcept
    : conns_(std::move(o.conns_)),
      epoll_fd_(std::exchange(o.epoll_fd_, -1)),
      first_pass_us_(o.first_pass_us_) {}

EventCustomers& EventCustomers::operator=(EventCustomers&& o) noexcept {
  std::swap(conns_, o.conns_);
  std::swap(epoll_fd_, o.epoll_fd_);
  first_pass_us_ = o.first_pass_us_;
  return *this;
}

EventCustomers::~EventCustomers() {
  for (Conn& c : conns_) {
    if (c.fd >= 0) ::close(c.fd);
  }
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

std::vector<std::vector<Exchange>> EventCustomers::run(const Script& script, int64_t timeout_ms) {
  size_t open = 0;
  // Writes what is left of the connection's request; false: it failed.
  auto flush = [&](Conn& c) {
    while (c.out_off < c.out.size()) {
      ssize_t n = ::send(c.fd, c.out.data() + c.out_off, c.out.size() - c.out_off, MSG_NOSIGNAL);
      if (n > 0) {
        c.out_off += static_cast<size_t>(n);
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else {
        return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
      }
    }
    return true;
  };
  auto finish = [&](Conn& c) {
    c.done = true;
    --open;
  };
  // Asks the script for the next request and starts it.
  auto next = [&](size_t i) {
    Conn& c = conns_[i];
    c.out = script(i, c.answers);
    c.out_off = 0;
    if (c.out.empty()) return finish(c);
    c.answers.push_back(Exchange{});
    c.answers.back().sent_ns = now_ns();
    if (!flush(c)) {
      c.answers.back().done_ns = now_ns();
      finish(c);
    }
  };
  for (Conn& c : conns_) {
    c.done = c.fd < 0;
    c.answers.clear();
    c.in.clear();
    open += !c.done;
  }
  std::vector<epoll_event> events(256);
  char buf[16384];
  // Reads what arrived; each complete answer gets its time now.
  auto serve = [&](int wait_ms) {
    int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), wait_ms);
    for (int e = 0; e < n; ++e) {
      size_t i = events[static_cast<size_t>(e)].data.u64;
      Conn& c = conns_[i];
      if (c.done || c.answers.empty()) continue;
      if (c.out_off < c.out.size() && !flush(c)) {
        c.answers.back().done_ns = now_ns();
        finish(c);
        continue;
      }
      // One read per readiness (level-triggered: what is left comes again).
      ssize_t r = ::recv(c.fd, buf, sizeof buf, 0);
      if (r > 0) c.in.append(buf, static_cast<size_t>(r));
      bool closed = r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
      Exchange& x = c.answers.back();
      long used = parse_answer(c.in, x.status, x.body);
      if (used > 0) {
        x.done_ns = now_ns();
        c.in.erase(0, static_cast<size_t>(used));
        next(i);
      } else if (used < 0 || closed) {
        x.status = 0;
        x.done_ns = now_ns();
        finish(c);
      }
    }
  };
  // The first pass looks for answers every few writes, so an early answer
  // is timed when it comes, not after the last customer's write.
  constexpr size_t kWritesPerLook = 8;
  int64_t t0 = now_ns();
  for (size_t i = 0; i < conns_.size(); ++i) {
    if (!conns_[i].done) next(i);
    if (i % kWritesPerLook == kWritesPerLook - 1) serve(0);
  }
  first_pass_us_ = (now_ns() - t0) / 1000;
  int64_t deadline = t0 + timeout_ms * 1'000'000;
  while (open > 0) {
    int64_t left_ms = (deadline - now_ns()) / 1'000'000;
    if (left_ms <= 0) break;
    serve(static_cast<int>(std::min<int64_t>(left_ms, 1000)));
  }
  std::vector<std::vector<Exchange>> out;
  out.reserve(conns_.size());
  for (Conn& c : conns_) {
    if (!c.answers.empty() && c.answers.back().done_ns == 0) c.answers.back().done_ns = now_ns();
    out.push_back(c.answers);
  }
  return out;
}

}  // namespace vend::bench
