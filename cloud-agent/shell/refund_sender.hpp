// RefundSender: the shell's side of the refund outbox. It takes the refunds
// AgentCore says are due and POSTs each to the payment gateway's refund URL,
// on its own thread (never the core's), then hands the outcome back to the core (which
// retries with backoff or gives up to an alert). One thread of its own.
//
// The request (docs/agent.md, "Refunds"): POST <url>, JSON
// {"refund_id","payment_id","order_id","amount_cents","reason"}, headers
// `Idempotency-Key: <refund_id>` and `Vend-Signature` (vend/webhook.hpp,
// subject = the refund id) under the gateway secret. What the answer means
// (payments/refund_answers.hpp): 2xx = refunded (the gateway dedups by
// refund id, so a repeat is harmless); no answer, 408, 409, 425, 429 or 5xx
// = try again, not before a Retry-After; any other status = refused for good.
//
// An outcome the core does not take (its inbox full, nothing writable
// now) is held here and offered again at the next pass, before any new
// refund is taken: never dropped, and the refund never stays in flight for
// good. Held outcomes are memory: after a crash the refund, still PENDING
// in the log, is sent again under the same refund id.
//
// Non-copyable, non-movable (owns a thread). `core`, `clock` and `log` must
// outlive it; the destructor stops and joins the thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "core/agent_core.hpp"
#include "payments/refund_answers.hpp"
#include "vend/clock.hpp"
#include "vend/log.hpp"
#include "vend/result.hpp"

namespace vend::agent {

struct RefundSenderOptions {
  std::string url;            // http://host[:port]/path or https://…
  std::string secret;         // the gateway secret
  int64_t timeout_ms = 5000;  // per request (connect, read, write)
  size_t batch_max = 16;      // refunds taken per pass
  int64_t poll_interval_ms = 200;
};

class RefundSender {
 public:
  // Fails with bad_request when the URL is not http(s)://host[:port][/path].
  static Result<std::unique_ptr<RefundSender>> create(AgentCore& core, RefundSenderOptions options,
                                                      const Clock& clock, Logger& log);
  ~RefundSender();
  RefundSender(const RefundSender&) = delete;
  RefundSender& operator=(const RefundSender&) = delete;

  // Starts the thread that calls run_once() every poll interval.
  void start();
  // Offers the held outcomes again; if the core took them all, delivers
  // every refund due now, one request at a time. Returns how many requests
  // were sent. Called by the thread, or directly by a test (one thread at a
  // time).
  size_t run_once();
  // Outcomes the core has not taken yet.
  size_t held() const { return held_.size(); }

 private:
  RefundSender(AgentCore& core, RefundSenderOptions options, std::string base, std::string path,
               const Clock& clock, Logger& log);
  struct Held {
    std::string refund_id;
    std::string payment_id;
    RefundAnswer answer;
  };

  RefundAnswer deliver(const RefundDelivery& refund);
  // Hands the outcome to the core; held when it is not taken.
  void offer(Held outcome);
  // True when nothing is held any more.
  bool offer_held();

  AgentCore& core_;
  RefundSenderOptions options_;
  std::string base_;  // scheme://host:port
  std::string path_;
  const Clock& clock_;
  Logger& log_;
  std::vector<Held> held_;  // run_once()'s thread only

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vend::agent
