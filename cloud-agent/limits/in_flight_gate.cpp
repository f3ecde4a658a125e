#include "limits/in_flight_gate.hpp"

#include <cassert>

namespace vend::agent {

bool InFlightGate::enter(const std::string& key) {
  if (max_per_key_ == 0) return true;
  std::lock_guard lock(mu_);
  size_t& n = in_flight_[key];
  if (n >= max_per_key_) {
    ++refused_;
    return false;
  }
  ++n;
  return true;
}

void InFlightGate::leave(const std::string& key) {
  if (max_per_key_ == 0) return;
  std::lock_guard lock(mu_);
  auto it = in_flight_.find(key);
  assert(it != in_flight_.end() && it->second > 0);
  if (it == in_flight_.end()) return;
  if (--it->second == 0) in_flight_.erase(it);
}

size_t InFlightGate::in_flight(const std::string& key) const {
  std::lock_guard lock(mu_);
  auto it = in_flight_.find(key);
  return it == in_flight_.end() ? 0 : it->second;
}

size_t InFlightGate::keys() const {
  std::lock_guard lock(mu_);
  return in_flight_.size();
}

uint64_t InFlightGate::refused_total() const {
  std::lock_guard lock(mu_);
  return refused_;
}

}  // namespace vend::agent
