#include "orders/order_ids.hpp"

#include <algorithm>

namespace vend::agent {

namespace {

constexpr std::string_view kPrefix = "ord-";
constexpr size_t kTimeDigits = 12;
constexpr size_t kRandomDigits = 32;

// `digits` lowercase hex digits of `v`, most significant first, at `out`.
void put_hex(char* out, uint64_t v, size_t digits) {
  constexpr char kHex[] = "0123456789abcdef";
  for (size_t i = digits; i-- > 0; v >>= 4) out[i] = kHex[v & 0xf];
}

bool is_lower_hex(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

std::string new_order_id(int64_t wall_ms, Random& random) {
  constexpr uint64_t kMask48 = (uint64_t{1} << 48) - 1;
  // The same text as "ord-" + "%012llx" + random.id128() (whose hex is each
  // 64-bit draw's, most significant byte first), written in place: this runs
  // once per reservation, and snprintf was a sixth of its instructions.
  std::string id(kPrefix.size() + kTimeDigits + kRandomDigits, '\0');
  id.replace(0, kPrefix.size(), kPrefix);
  char* out = id.data() + kPrefix.size();
  put_hex(out, static_cast<uint64_t>(std::max<int64_t>(wall_ms, 0)) & kMask48, kTimeDigits);
  put_hex(out + kTimeDigits, random.next_u64(), 16);
  put_hex(out + kTimeDigits + 16, random.next_u64(), 16);
  return id;
}

bool could_be_order_id(std::string_view id, int64_t now_wall_ms, int64_t max_ahead_ms) {
  if (id.substr(0, kPrefix.size()) != kPrefix) return false;
  std::string_view hex = id.substr(kPrefix.size());
  if (!is_lower_hex(hex)) return false;
  if (hex.size() == kRandomDigits) return true;  // stored before the time prefix
  if (hex.size() != kTimeDigits + kRandomDigits) return false;
  int64_t created_ms = 0;
  for (char c : hex.substr(0, kTimeDigits)) {
    created_ms = created_ms * 16 + (c <= '9' ? c - '0' : c - 'a' + 10);
  }
  return created_ms <= now_wall_ms + max_ahead_ms;
}

}  // namespace vend::agent
