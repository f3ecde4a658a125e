// Order ids: how the core makes one, and which texts no order can have.
//
// An id is "ord-", the creation time (wall ms, 12 lowercase hex digits),
// then 128 random bits (32 lowercase hex digits): 48 characters. Orders
// stored before the time prefix have "ord-" and 32 hex digits. The time
// first puts each new order at the right edge of every B-tree keyed by order
// id (one page per group commit instead of one per order); the random tail
// keeps the id as unguessable as before (it is enough to cancel).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vend/random.hpp"

namespace vend::agent {

// A new order id made at `wall_ms` (negative counts as 0).
std::string new_order_id(int64_t wall_ms, Random& random);

// False when no order of this agent can have `id`: not one of the two
// shapes above, or created more than `max_ahead_ms` after `now_wall_ms`
// (another instance's clock may run ahead a little, never a day). A request
// about such an id is answered not_found without reading the log.
bool could_be_order_id(std::string_view id, int64_t now_wall_ms,
                       int64_t max_ahead_ms = 24 * 3600 * 1000);

}  // namespace vend::agent
