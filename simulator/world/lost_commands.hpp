// The promise behind the command_lost fault, checked every step: a paid
// order whose dispense command the broker lost after accepting it is
// dispensed, not refunded, when nothing else went wrong — its machine and
// the agents stayed undisturbed (WorldFaults::disturbances) from the loss
// until the order ended. The agent re-sends a live command until a result
// arrives, so such an order may end REFUNDED only after its machine tried
// it (a jam, a power cut mid-rotation). Not thread-safe. Non-copyable.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "checker/invariant_checker.hpp"
#include "vend/sqlite.hpp"
#include "world/world_faults.hpp"

namespace vend::sim {

class LostCommandWatch {
 public:
  // Reads the agent database and the ledgers in `dir` (the world's files).
  explicit LostCommandWatch(std::string dir) : dir_(std::move(dir)) {}
  LostCommandWatch(const LostCommandWatch&) = delete;
  LostCommandWatch& operator=(const LostCommandWatch&) = delete;

  // Starts watching these orders.
  void add(std::vector<LostCommand> lost);
  // Stops watching the orders that ended or were disturbed; a breach is
  // `lost_command_not_resent`. Errors: a file that cannot be read.
  Result<std::vector<Violation>> check(const WorldFaults& faults);
  // Orders watched to the end that were COMPLETED.
  int64_t completed() const { return completed_; }

 private:
  // The order's state at the agent ("" while it is not there).
  Result<std::string> order_state(const std::string& order_id);
  // The order's dispense state in its machine's ledger ("" when none).
  Result<std::string> dispense_state(const LostCommand& lost);
  Result<sql::Database*> database(const std::string& file);

  std::string dir_;
  std::vector<LostCommand> watched_;
  std::map<std::string, sql::Database> open_;  // file -> read connection
  int64_t completed_ = 0;
};

}  // namespace vend::sim
