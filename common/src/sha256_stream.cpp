// The low-level functions are deprecated in OpenSSL 3 but kept through 3.x
// (crypto.cpp says why they are used).
#define OPENSSL_SUPPRESS_DEPRECATED
#include "vend/sha256_stream.hpp"

#include "vend/crypto.hpp"

namespace vend::crypto {

Sha256Stream::Sha256Stream() { SHA256_Init(&ctx_); }

void Sha256Stream::add(std::string_view data) {
  SHA256_Update(&ctx_, data.data(), data.size());
  size_ += data.size();
}

std::string Sha256Stream::finish_hex() {
  unsigned char out[SHA256_DIGEST_LENGTH];
  SHA256_Final(out, &ctx_);
  return to_hex(out, sizeof out);
}

}  // namespace vend::crypto
