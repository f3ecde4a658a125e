// Signatures of firmware updates: Ed25519 (OpenSSL EVP, EVP_PKEY_ED25519)
// under the fleet's *update key*, which is not a device key. Its private half
// stays offline with the release engineer (`vendctl sign-update`); devices
// hold the public half (device.json `update.public_key_file`); the agent holds
// neither and only forwards signatures. A signature covers the update
// manifest (update_manifest below), so one signature serves every device and
// every URL the artifact is served from. Thread-safe (no shared state).
//
// Keys are raw 32-byte Ed25519 keys written as 64 hex chars (the private key
// is its seed); signatures are 64 bytes, 128 lowercase hex chars.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "vend/result.hpp"

namespace vend::crypto {

// The bytes an update signature covers:
// "vend-update-v1\nversion=<version>\nsize_bytes=<n>\nsha256=<hex>\n".
std::string update_manifest(std::string_view version, uint64_t size_bytes,
                            std::string_view sha256_hex);

struct UpdateKeyPair {
  std::string private_hex;  // 64 hex chars: keep offline, mode 0600
  std::string public_hex;   // 64 hex chars: goes into every device image
};

// A fresh key pair from OpenSSL's CSPRNG.
UpdateKeyPair generate_update_key();

// The public hex of a private key. Errors: "bad_key" naming the problem.
Result<std::string> update_public_key_of(std::string_view private_hex);

// Signs `manifest`; 128 lowercase hex chars. Errors: "bad_key".
Result<std::string> sign_update(std::string_view private_hex, std::string_view manifest);

// A device's copy of the update public key.
class UpdateVerifier {
 public:
  // Parses 64 hex chars (surrounding whitespace allowed). Errors: "bad_key".
  static Result<UpdateVerifier> from_hex(std::string_view public_hex);
  // Reads a file holding the hex key. Errors name the path.
  static Result<UpdateVerifier> load_file(const std::string& path);

  // True when `signature_hex` is a valid Ed25519 signature of `manifest`.
  bool verify(std::string_view manifest, std::string_view signature_hex) const;
  const std::string& public_hex() const { return public_hex_; }

 private:
  explicit UpdateVerifier(std::string public_hex) : public_hex_(std::move(public_hex)) {}
  std::string public_hex_;
};

}  // namespace vend::crypto
