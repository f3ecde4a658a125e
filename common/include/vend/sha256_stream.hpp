// SHA-256 over data that arrives in pieces (a download), through OpenSSL's
// low-level SHA256_* functions like crypto.hpp. Not thread-safe; copyable
// (a copy continues from the same state).
#pragma once

#include <openssl/sha.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace vend::crypto {

class Sha256Stream {
 public:
  Sha256Stream();
  void add(std::string_view data);
  // The lowercase hex digest of everything added; the stream is then spent.
  std::string finish_hex();
  // Bytes added so far.
  uint64_t size() const { return size_; }

 private:
  SHA256_CTX ctx_;
  uint64_t size_ = 0;
};

}  // namespace vend::crypto
