// InFlightGate: at most `max_per_key` requests in flight per key (a peer
// address) at once. A request enters before its work starts and leaves once
// answered; one more is refused, so one source cannot hold every queue slot
// of the agent (the handler queue, the core's call queue) however fast it
// sends. Memory holds only the keys with a request in flight.
//
// Thread-safe (one mutex). Non-copyable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace vend::agent {

class InFlightGate {
 public:
  // max_per_key 0: no limit (every enter() succeeds, nothing is kept).
  explicit InFlightGate(size_t max_per_key) : max_per_key_(max_per_key) {}
  InFlightGate(const InFlightGate&) = delete;
  InFlightGate& operator=(const InFlightGate&) = delete;

  // True when `key` had fewer than max_per_key in flight: it now has one
  // more, and the caller must leave() once. False: refused (counted).
  bool enter(const std::string& key);
  // REQUIRES: a successful enter(key) not yet left.
  void leave(const std::string& key);

  size_t max_per_key() const { return max_per_key_; }
  size_t in_flight(const std::string& key) const;
  size_t keys() const;  // keys with a request in flight
  uint64_t refused_total() const;

 private:
  const size_t max_per_key_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, size_t> in_flight_;
  uint64_t refused_ = 0;
};

}  // namespace vend::agent
