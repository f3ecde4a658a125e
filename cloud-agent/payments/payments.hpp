// Payments: every verified payment notification the core knows, by payment
// id, and the refund outbox. A refund enters the outbox with the commit that
// records it (stage_refund, then committed), is handed to the shell for
// delivery once that commit is durable (take_due), and leaves it when the
// gateway confirms it or it is given up (attempted). Memory only: the core
// writes what happens in its changesets, counts, logs and alerts; times are
// wall milliseconds passed in.
//
// Single-threaded (the core's thread). Not copyable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "contracts/refund.hpp"
#include "contracts/repository_types.hpp"
#include "vend/random.hpp"

namespace vend::agent {

// A payment id's record: its order, amount, what was done with it, and the
// commit that stores it (what a repeated notification's answer waits for).
struct PaymentRecord {
  std::string order_id;
  int64_t amount_cents = 0;
  std::string outcome;
  Ticket recorded;
};

// Retries of a failed delivery: base_ms doubled per attempt up to max_ms,
// plus up to a quarter more at random; given up after max_attempts.
struct RefundRetryPolicy {
  int64_t base_ms = 1'000;
  int64_t max_ms = 300'000;
  int max_attempts = 20;
};

class Payments {
 public:
  explicit Payments(RefundRetryPolicy policy);
  Payments(const Payments&) = delete;
  Payments& operator=(const Payments&) = delete;

  // ---- payment records ----
  const PaymentRecord* find(const std::string& payment_id) const;  // nullptr: unknown here
  void record(const std::string& payment_id, PaymentRecord record);
  void forget(const std::string& payment_id);  // its order left memory

  // ---- the refund outbox ----
  // A refund written into a changeset not submitted yet.
  void stage_refund(StoredRefund refund);
  // The changeset was submitted: what was staged enters the outbox, to be
  // delivered once `recorded` is durable.
  void committed(const Ticket& recorded);
  // The submit was refused: what was staged is not recorded anywhere.
  void drop_staged();
  // Every now_ms below is monotonic: retry times are intervals, and a step
  // of the wall clock must neither stall nor rush a refund.
  // After a restart, the log's PENDING refunds, due at once (a delivery in
  // flight at the crash is sent again: the gateway deduplicates).
  void load_refunds(const std::vector<StoredRefund>& pending, int64_t now_ms);
  // The outbox's refund of `payment_id`, nullptr if none.
  const StoredRefund* pending_refund(const std::string& payment_id) const;
  size_t refunds_pending() const { return outbox_.size(); }

  // Up to `max` refunds due now whose record is durable, marked in flight
  // until attempted() or release().
  std::vector<RefundDelivery> take_due(size_t max, int64_t now_ms);

  // What the core writes after an attempt.
  struct Attempt {
    enum class Next {
      kNone,       // not in flight: not ours (any more); nothing to do
      kDelivered,  // confirmed: write DELIVERED (it left the outbox)
      kRetry,      // write PENDING with its attempts; tried again at retry_at_ms
      kGiveUp,     // write GAVE_UP and alert with `why` (it left the outbox)
    };
    Next next = Next::kNone;
    StoredRefund refund;  // attempts and last_error updated
    int64_t retry_at_ms = 0;
    std::string why;
  };
  // A delivery of take_due() ended with `outcome` (`detail`: the gateway's
  // words, kept as last_error up to 256 bytes). `random` draws the jitter of
  // a retry; `retry_after_ms` (the gateway's Retry-After, 0: none) holds
  // it back at least that long.
  Attempt attempted(const std::string& payment_id, RefundOutcome outcome, const std::string& detail,
                    int64_t now_ms, Random& random, int64_t retry_after_ms = 0);
  // A delivery ended but nothing can be written now: the refund stays
  // PENDING, not in flight, due as it was.
  void release(const std::string& payment_id);

  // The delay before attempt `attempts` + 1, without the jitter.
  int64_t backoff_ms(int attempts) const;

 private:
  struct Refund {
    StoredRefund refund;
    Ticket recorded;
    int64_t next_attempt_ms = 0;
    bool in_flight = false;
  };

  RefundRetryPolicy policy_;
  std::unordered_map<std::string, PaymentRecord> payments_;
  std::vector<StoredRefund> staged_;
  std::map<std::string, Refund> outbox_;  // payment id -> PENDING refund
};

}  // namespace vend::agent
