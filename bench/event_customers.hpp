// EventCustomers: many HTTP/1.1 keep-alive customers on one thread (one
// epoll set), for the benchmarks whose customers must not cost the machine
// under test a thread each. A thousand phones are a thousand devices, not a
// thousand threads on the agent's two cores: with one thread per customer
// the measured latency included waiting for the client's own thread to be
// scheduled again after its answer had arrived.
//
// Each customer sends one request at a time and reads its whole answer
// (Content-Length bodies only: the agent's JSON replies) before its script
// gives the next. A request's latency runs from just before its bytes are
// written to the moment its answer is complete.
//
// Not thread-safe: one thread uses it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vend/result.hpp"

namespace vend::bench {

struct Exchange {
  int status = 0;  // 0: no answer (connection closed or timed out)
  std::string body;
  int64_t sent_ns = 0;  // steady clock (now_ns)
  int64_t done_ns = 0;
  int64_t latency_us() const { return (done_ns - sent_ns) / 1000; }
};

class EventCustomers {
 public:
  // Customer c's next request (the raw HTTP/1.1 bytes), given its answers
  // so far (empty before the first); "" when it is done.
  using Script = std::function<std::string(size_t customer, const std::vector<Exchange>& answers)>;

  // Opens `customers` connections to 127.0.0.1:port and makes each one
  // request (GET /healthz) so that every connection is accepted and in
  // keep-alive before run(). An error names the first customer that failed.
  static Result<EventCustomers> connect(int port, size_t customers);

  EventCustomers(EventCustomers&&) noexcept;
  EventCustomers& operator=(EventCustomers&&) noexcept;
  EventCustomers(const EventCustomers&) = delete;
  EventCustomers& operator=(const EventCustomers&) = delete;
  ~EventCustomers();

  // Writes every customer's first request at once (one pass over the
  // connections), then serves answers and follow-ups until every script is
  // done or `timeout_ms` passes. Returns each customer's exchanges.
  std::vector<std::vector<Exchange>> run(const Script& script, int64_t timeout_ms);
  // How long the first pass took to write every first request.
  int64_t first_pass_us() const { return first_pass_us_; }

 private:
  EventCustomers() = default;
  struct Conn;
  std::vector<Conn> conns_;
  int epoll_fd_ = -1;
  int64_t first_pass_us_ = 0;
};

// The raw bytes of a request to the agent: Host, Content-Length (when a body
// is given) and `headers` (each "Name: value").
std::string http_request(const std::string& method, const std::string& path,
                         const std::vector<std::string>& headers = {},
                         const std::string& body = "");

// The raw bytes of the gateway's payment notification for `order_id`, signed
// now (signed_payment(), bench_agent_rig.hpp).
std::string payment_request(const std::string& gateway_secret, const std::string& order_id,
                            const std::string& payment_id, int64_t amount_cents);

}  // namespace vend::bench
