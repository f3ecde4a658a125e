// Random: the only source of randomness in core code (CONVENTIONS.md #2).
// Production uses SecureRandom; tests and the deterministic simulator use
// SeededRandom so that one seed reproduces a run exactly.
#pragma once

#include <cstdint>
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

// The kernel CSPRNG (getrandom). Thread-safe.
class SecureRandom final : public Random {
 public:
  uint64_t next_u64() override;
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
