// Password hashing for operator accounts: scrypt (RFC 7914) through
// OpenSSL 3's EVP_KDF, already linked by the agent (no new dependency on the
// boards' cross builds).
//
// Parameters: N = 2^16, r = 8, p = 1, a 16-byte random salt, a 32-byte key.
// Memory is 128 * N * r = 64 MiB per hash and about 0.1-0.2 s of one core
// (x86-64, 2026): a guess costs an attacker who stole the log the same
// memory, which is what makes GPUs and ASICs slow at it. OWASP's minimum for
// scrypt is N = 2^17 (128 MiB); half of it is chosen because the agent may
// run on a small host, and PasswordHasher runs one hash at a time, so login
// bursts cost time, never N times the memory. The encoding keeps the
// parameters, so a later release can raise them and rehash at login.
#pragma once

#include <string>
#include <string_view>

#include "vend/result.hpp"

namespace vend::agent::password {

struct ScryptParams {
  uint64_t n = uint64_t{1} << 16;
  uint32_t r = 8;
  uint32_t p = 1;
};

// "scrypt$<N>$<r>$<p>$<salt hex>$<key hex>" of `password` with a new random
// salt. "internal" when OpenSSL fails.
Result<std::string> hash(std::string_view password, const ScryptParams& params = {});

// True when `password` matches `encoded` (hash()'s form), compared in
// constant time; false for a malformed `encoded` too.
bool verify(std::string_view password, const std::string& encoded);

// Why `password` is refused as a new password ("" = acceptable): 12..1024
// bytes.
std::string weakness(std::string_view password);

}  // namespace vend::agent::password
