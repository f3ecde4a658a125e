// Random: the only source of randomness in core code (CONVENTIONS.md #2).
// Production uses SecureRandom; tests and the deterministic simulator use
// SeededRandom so that one seed reproduces a run exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>

namespace vend {

class Random {
 public:
  virtual ~Random() = default;
  virtual uint64_t next_u64() = 0;

  // Uniform in [0, 1).
  double uniform();
  // Uniform in [lo, hi]. REQUIRES: lo <= hi.
  int64_t range(int64_t lo, int64_t hi);
  // True with probability p.
  bool chance(double p) { return uniform() < p; }
  // 128 bits as 32 lowercase hex chars (token and boot ids).
  std::string id128();
};

// The kernel CSPRNG (getrandom), read in blocks of kBufferBytes: one
// system call per 64 draws instead of one per draw (an order id costs two
// draws). The bytes are the kernel's, unchanged; each is handed out once and
// wiped as it is. A forked child never hands out its parent's buffered bytes
// (it refills first). Thread-safe. Not copyable.
class SecureRandom final : public Random {
 public:
  static constexpr size_t kBufferBytes = 512;

  SecureRandom() = default;
  SecureRandom(const SecureRandom&) = delete;
  SecureRandom& operator=(const SecureRandom&) = delete;
  uint64_t next_u64() override;

 private:
  std::mutex mu_;
  uint8_t buffer_[kBufferBytes] = {};
  size_t next_ = kBufferBytes;  // the first byte not handed out yet
  uint64_t filled_in_ = 0;      // the fork generation that filled the buffer
};

// xoshiro256** seeded through splitmix64. Not thread-safe; deterministic.
class SeededRandom final : public Random {
 public:
  explicit SeededRandom(uint64_t seed);
  uint64_t next_u64() override;

 private:
  uint64_t s_[4];
};

}  // namespace vend
