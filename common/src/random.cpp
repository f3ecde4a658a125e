#include "vend/random.hpp"

#include <cassert>
#include <cstdlib>

#include "vend/crypto.hpp"

namespace vend {

namespace {
uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

double Random::uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }

int64_t Random::range(int64_t lo, int64_t hi) {
  assert(lo <= hi);
  uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
  if (span == 0) return static_cast<int64_t>(next_u64());  // full 64-bit range
  return lo + static_cast<int64_t>(next_u64() % span);
}

std::string Random::id128() {
  // Byte order fixed explicitly so a seed gives the same ids on every CPU.
  uint8_t bytes[16];
  for (int w = 0; w < 2; ++w) {
    uint64_t v = next_u64();
    for (int i = 0; i < 8; ++i) bytes[w * 8 + i] = static_cast<uint8_t>(v >> (56 - 8 * i));
  }
  return crypto::to_hex(bytes, sizeof bytes);
}

uint64_t SecureRandom::next_u64() {
  uint64_t v = 0;
  crypto::random_bytes(reinterpret_cast<uint8_t*>(&v), sizeof v);
  return v;
}

SeededRandom::SeededRandom(uint64_t seed) {
  for (auto& s : s_) s = splitmix64(seed);
}

uint64_t SeededRandom::next_u64() {
  const uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

}  // namespace vend
