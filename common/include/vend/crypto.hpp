// Crypto over OpenSSL libcrypto: HMAC-SHA256 message authentication, SHA-256,
// hex, and random ids. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "vend/result.hpp"

namespace vend::crypto {

// A device key: 32 random bytes, written as 64 hex chars in key files.
class Key {
 public:
  Key() = default;
  explicit Key(std::vector<uint8_t> bytes) : bytes_(std::move(bytes)) {}

  // Parses hex (surrounding whitespace allowed). Errors: "bad_key" naming
  // the problem (odd length, non-hex char at position N, shorter than 16 bytes).
  static Result<Key> from_hex(std::string_view hex);
  // Reads a file holding hex. Errors name the path.
  static Result<Key> load_file(const std::string& path);
  // 32 fresh random bytes.
  static Key generate();

  const std::vector<uint8_t>& bytes() const { return bytes_; }
  std::string to_hex() const;
  bool empty() const { return bytes_.empty(); }

 private:
  std::vector<uint8_t> bytes_;
};

// Raw HMAC-SHA256 of `data` under `key` (32 bytes).
std::vector<uint8_t> hmac_sha256(const std::vector<uint8_t>& key, std::string_view data);

// Lowercase hex MAC of a message's canonical form.
std::string sign(const Key& key, std::string_view canonical);
// Constant-time comparison of the expected MAC with `mac_hex`.
bool verify(const Key& key, std::string_view canonical, std::string_view mac_hex);

// Lowercase hex SHA-256.
std::string sha256_hex(std::string_view data);

// Digest of a set of token ids: SHA-256 over the ids sorted and joined by
// '\n'. Order-independent; the empty set has a fixed digest.
std::string token_digest(std::vector<std::string> tokens);
// The same digest over views (no copy of the ids; the agent's reconciliation
// hashes every slot of every snapshot).
std::string token_digest_of_views(std::vector<std::string_view> tokens);

// Fills `out` with `n` bytes from the kernel CSPRNG (getrandom(2)); aborts
// if it fails (never weak randomness).
void random_bytes(uint8_t* out, size_t n);

// 128 random bits (getrandom) as 32 lowercase hex chars: token
// ids and boot ids.
std::string random_id128();

std::string to_hex(const uint8_t* data, size_t size);
Result<std::vector<uint8_t>> from_hex(std::string_view hex);

}  // namespace vend::crypto
