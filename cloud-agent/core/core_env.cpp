// The core's shared helpers (core_env.hpp).
#include "core/core_env.hpp"

#include <future>
#include <utility>

namespace vend::agent {

namespace detail {

Ticket ready_ticket(Status status) {
  std::promise<Status> p;
  p.set_value(std::move(status));
  return p.get_future().share();
}

Status check_text(const std::string& what, const std::string& value, size_t max_len,
                  bool allow_empty) {
  if (value.empty()) {
    if (allow_empty) return {};
    return make_error("bad_request", what + " is empty");
  }
  if (value.size() > max_len) {
    return make_error("bad_request", what + " is longer than " + std::to_string(max_len));
  }
  for (unsigned char c : value) {
    if (c < 0x21 || c > 0x7e) return make_error("bad_request", what + " has a non-printable byte");
  }
  return {};
}

}  // namespace detail

Status CoreEnv::owner_check(const std::string& device) const {
  if (serves(device)) return {};
  return make_error("not_owner", device);
}

}  // namespace vend::agent
