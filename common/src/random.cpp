#include "vend/random.hpp"

#include <pthread.h>

#include <atomic>
#include <cassert>
#include <cstdlib>
#include <cstring>
#include <mutex>

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

namespace {
// Bumped in every forked child: a buffer filled in another generation holds
// bytes the parent (or a sibling) may hand out too, so it is refilled.
std::atomic<uint64_t> fork_generation{1};
void count_fork() { fork_generation.fetch_add(1, std::memory_order_relaxed); }
uint64_t current_generation() {
  static std::once_flag registered;
  std::call_once(registered, [] { pthread_atfork(nullptr, nullptr, count_fork); });
  return fork_generation.load(std::memory_order_relaxed);
}
}  // namespace

uint64_t SecureRandom::next_u64() {
  uint64_t generation = current_generation();
  std::lock_guard lock(mu_);
  if (next_ + sizeof(uint64_t) > kBufferBytes || filled_in_ != generation) {
    crypto::random_bytes(buffer_, kBufferBytes);
    next_ = 0;
    filled_in_ = generation;
  }
  uint64_t v = 0;
  std::memcpy(&v, buffer_ + next_, sizeof v);
  std::memset(buffer_ + next_, 0, sizeof v);  // handed out once
  next_ += sizeof v;
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
