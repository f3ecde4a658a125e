// Private to the agent core: its writes. Memory is the working truth, the
// Repository its durable log: each change is applied to memory and its
// writes are submitted in the same step, so the log receives changes in the
// order memory saw them. Writes says whether a step may write (started,
// storage healthy, not fenced or draining, queue room), submits its
// changeset (fenced by device in cluster mode) and stops the core's writes
// for good when storage fails.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/core_env.hpp"
#include "orders/order_book.hpp"
#include "payments/payments.hpp"

namespace vend::agent {

class Writes : public CoreEnv {
 public:
  Writes(const CoreEnv& env, OrderBook& orders, Payments& payments)
      : CoreEnv(env), orders_(orders), payments_(payments) {}

  // ok when a mutation may proceed: started, storage healthy, not fenced or
  // draining, queue room.
  Status writable();
  // Submits, and makes the ticket the last_write of every order touch()ed
  // since the previous commit. A refused submit (writable() said yes)
  // fails storage.
  Ticket commit(Changeset changes);
  // The order changed state in this step: its answer waits for the next commit.
  void touch(OrderRef ref) { touched_.push_back(ref); }
  // The audit row of the operator action this step runs (AgentCore's
  // operator methods): stamped now, it rides in the step's next commit(),
  // in the same changeset as the action's change, so both commit or
  // neither. An entry without an account is no audit (callers other than
  // the HTTP API). unattribute() at the end of the step drops a row whose
  // action committed nothing (refused).
  void attribute(AuditEntry entry);
  void unattribute() { audit_.reset(); }
  void fail_storage(const std::string& why);
  // A write of `what` failed with `e`: refused by the fence (the shard's
  // lease moved: fenced, the shell rebuilds) or a storage failure.
  void write_failed(const Error& e, const std::string& what);
  // True once storage failed (a failed write of the writer thread included).
  bool failed();

  bool started = false;
  bool storage_failed = false;
  // Cluster mode: the two ways the core stops writing until
  // AgentCore::rebuild(): draining (a rebuild is under way) and fenced (a
  // write was refused by the fence).
  bool draining = false;
  bool fenced = false;

 private:
  void fence_devices(Changeset& changes);

  OrderBook& orders_;
  Payments& payments_;
  std::vector<OrderRef> touched_;    // orders set_state() changed since the last commit()
  std::optional<AuditEntry> audit_;  // attribute()d, not committed yet
};

}  // namespace vend::agent
