// InvariantChecker: the promise, checked against the durable records only —
// every machine's ledger file and the agent's database — never against what
// a core believes in memory. Used after every step of a deterministic run and
// at the end of a live run.
//
// Invariants (names as they appear in Violation::invariant):
//   dispense_without_token   a dispense that ran (or is about to run) whose
//                            token is not consumed/burned in that ledger, or a
//                            REJECTED one that still holds its token
//   token_spent_twice        a token consumed by more than one dispense
//   dispensed_over_restocked a slot dispensed more items than were loaded
//   order_dispensed_twice    one order id dispensed by two machines
//   token_conservation       per slot: minted = available + reserved +
//                            in flight + consumed + burned, where each token's
//                            device state and agent state must be compatible
//                            (e.g. the agent may not sell a token the device
//                            already spent, nor count a sale the device never
//                            made); unknown tokens in the agent break it too
//   dispense_order_mismatch  a dispensed order the agent does not know, knows
//                            for another device/token, or has refunded
//   completed_without_dispense  an order COMPLETED at the agent whose
//                            machine never dispensed it
//   paid_order_lost          a paid order outside PAID..NEEDS_REVIEW; once
//                            settled, outside COMPLETED | REFUNDED |
//                            NEEDS_REVIEW-with-an-UNCERTAIN-dispense
//   refund_missing           settled: a REFUNDED order or a duplicate / late
//                            payment without its refund row
//   completed_and_refunded   a COMPLETED order whose payment was refunded
//   motor_ran_unaccounted    a machine's motor ran more times than there are
//                            orders whose dispense reached the motor in its
//                            ledger (given the physical counts: one order's
//                            item dispensed twice, e.g. by a ledger that
//                            went back in time and forgot it)
//
// A ledger file that went back in time (restored from an older copy) keeps
// what the file it replaced recorded as the physical truth: tokens spent and
// dispenses finished there stay so (add_replaced_ledger).
//
// And the customers' side (check_promises, deterministic world only):
//   answered_order_lost      an order the customer was answered as created
//                            is not in the agent's database
//   answered_payment_lost    a payment answered 2xx is not recorded
//   refund_undelivered       settled: a refund not confirmed by the gateway
//
// Reading is done on connections of the checker's own (committed data only),
// so writers in other threads or processes are not disturbed.
// Not thread-safe. Non-copyable.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vend/result.hpp"
#include "vend/sqlite.hpp"

namespace vend::sim {

struct Violation {
  std::string invariant;  // one of the names above
  std::string evidence;   // the rows that break it, for a human
  bool operator==(const Violation&) const = default;
};

// What the agent told its customers (orders created, payments answered 2xx).
struct Promises {
  std::vector<std::string> orders;
  std::map<std::string, std::vector<std::string>> payments;  // order id -> payment ids
};

enum class CheckPhase {
  kRunning,  // work may be in flight: only what must hold at every instant
  kSettled,  // the world is quiet: every paid order must be finished too
};

// Which files to read.
struct FleetFiles {
  std::map<std::string, std::string> ledgers;  // device id -> ledger path
  std::string agent_db;                        // "" = ledger-only checks
  // device id -> copies of ledger files a restore replaced, oldest first.
  std::map<std::string, std::vector<std::string>> replaced;
};

// Ledger files in `dir` are named "<device>.ledger.db", the files a restore
// replaced "<device>.ledger.db.replaced-N" (N from 1) and the agent's
// database "agent.db" (the simulator's work-dir layout).
FleetFiles fleet_files_in(const std::string& dir);
std::string ledger_file_name(const std::string& device);
inline constexpr const char* kAgentDbName = "agent.db";

class InvariantChecker {
 public:
  // Files that do not exist yet are opened on the first check that finds
  // them (a machine that has not booted, an agent not started).
  explicit InvariantChecker(FleetFiles files);
  ~InvariantChecker();
  InvariantChecker(const InvariantChecker&) = delete;
  InvariantChecker& operator=(const InvariantChecker&) = delete;

  // Reads every file and returns the broken invariants (empty: all hold).
  // Errors: a file that exists but cannot be read ("sqlite_*").
  // `rotations`: device -> how many times its motor really ran, when known.
  Result<std::vector<Violation>> check(CheckPhase phase,
                                       const std::map<std::string, int64_t>& rotations = {});
  // `path` holds what `device`'s ledger file held when a restore replaced it
  // (never written again): what it recorded spent or finished stays so.
  void add_replaced_ledger(const std::string& device, const std::string& path);
  // The agent kept its word: see the names above.
  Result<std::vector<Violation>> check_promises(const Promises& promises, CheckPhase phase);

 private:
  struct Data;
  Status load(Data& data);
  Result<sql::Database*> database(const std::string& path);

  struct Replaced;  // the replaced files' records, read once
  Status merge_replaced(Data& data);

  FleetFiles files_;
  std::map<std::string, sql::Database> open_;  // path -> read connection
  std::unique_ptr<Replaced> replaced_;
};

// "invariant: evidence" lines, one per violation.
std::string format_violations(const std::vector<Violation>& violations);

}  // namespace vend::sim
