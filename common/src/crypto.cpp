// SHA-256 through OpenSSL's low-level functions (SHA256_Init/Update/Final),
// HMAC built on them (RFC 2104), randomness from getrandom(2). Not the EVP
// interface: its first use initializes OpenSSL 3's provider framework (the
// config file, algorithm tables), about 2 MB of resident memory that a
// device daemon on a small board does not need; the low-level functions run
// the same assembly. They are deprecated in OpenSSL 3 but kept through 3.x.
#define OPENSSL_SUPPRESS_DEPRECATED
#include "vend/crypto.hpp"

#include <openssl/crypto.h>
#include <openssl/sha.h>
#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace vend::crypto {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

class Sha256 {
 public:
  Sha256() { SHA256_Init(&ctx_); }
  Sha256& add(const void* data, size_t size) {
    SHA256_Update(&ctx_, data, size);
    return *this;
  }
  Sha256& add(std::string_view s) { return add(s.data(), s.size()); }
  void finish(uint8_t out[SHA256_DIGEST_LENGTH]) { SHA256_Final(out, &ctx_); }

 private:
  SHA256_CTX ctx_;
};

}  // namespace

void random_bytes(uint8_t* out, size_t n) {
  while (n > 0) {
    ssize_t got = getrandom(out, n, 0);
    if (got < 0 && errno == EINTR) continue;
    // The kernel's CSPRNG failing is a bug-class condition we must not paper
    // over with weak ids.
    if (got <= 0) std::abort();
    out += got;
    n -= static_cast<size_t>(got);
  }
}

std::string to_hex(const uint8_t* data, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 0xf];
  }
  return out;
}

Result<std::vector<uint8_t>> from_hex(std::string_view hex) {
  if (hex.size() % 2 != 0) {
    return make_error("bad_hex", "odd number of hex digits (" + std::to_string(hex.size()) + ")");
  }
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < hex.size(); i += 2) {
    int hi = hex_value(hex[i]);
    int lo = hex_value(hex[i + 1]);
    if (hi < 0 || lo < 0) {
      size_t bad = hi < 0 ? i : i + 1;
      return make_error("bad_hex", "non-hex character at position " + std::to_string(bad));
    }
    out[i / 2] = static_cast<uint8_t>((hi << 4) | lo);
  }
  return out;
}

Result<Key> Key::from_hex(std::string_view hex) {
  auto bytes = crypto::from_hex(trim(hex));
  if (!bytes.ok()) return make_error("bad_key", "key is not valid hex: " + bytes.error().message);
  if (bytes->size() < 16) {
    return make_error("bad_key", "key too short: " + std::to_string(bytes->size()) +
                                     " bytes, need at least 16 (32 recommended)");
  }
  return Key(std::move(bytes).value());
}

Result<Key> Key::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error("bad_key", "cannot read key file '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  auto key = from_hex(ss.str());
  if (!key.ok()) return make_error("bad_key", "key file '" + path + "': " + key.error().message);
  return key;
}

Key Key::generate() {
  std::vector<uint8_t> bytes(32);
  random_bytes(bytes.data(), bytes.size());
  return Key(std::move(bytes));
}

std::string Key::to_hex() const { return crypto::to_hex(bytes_.data(), bytes_.size()); }

std::vector<uint8_t> hmac_sha256(const std::vector<uint8_t>& key, std::string_view data) {
  constexpr size_t kBlock = SHA256_CBLOCK;  // 64
  uint8_t block[kBlock] = {};
  if (key.size() > kBlock) {
    Sha256().add(key.data(), key.size()).finish(block);
  } else if (!key.empty()) {
    std::copy(key.begin(), key.end(), block);
  }
  uint8_t ipad[kBlock];
  uint8_t opad[kBlock];
  for (size_t i = 0; i < kBlock; ++i) {
    ipad[i] = block[i] ^ 0x36;
    opad[i] = block[i] ^ 0x5c;
  }
  uint8_t inner[SHA256_DIGEST_LENGTH];
  Sha256().add(ipad, kBlock).add(data).finish(inner);
  std::vector<uint8_t> out(SHA256_DIGEST_LENGTH);
  Sha256().add(opad, kBlock).add(inner, sizeof inner).finish(out.data());
  OPENSSL_cleanse(block, sizeof block);
  OPENSSL_cleanse(ipad, sizeof ipad);
  OPENSSL_cleanse(opad, sizeof opad);
  return out;
}

std::string sign(const Key& key, std::string_view canonical) {
  auto mac = hmac_sha256(key.bytes(), canonical);
  return to_hex(mac.data(), mac.size());
}

bool verify(const Key& key, std::string_view canonical, std::string_view mac_hex) {
  if (key.empty() || mac_hex.size() != 64) return false;
  std::string expected = sign(key, canonical);
  return CRYPTO_memcmp(expected.data(), mac_hex.data(), expected.size()) == 0;
}

std::string sha256_hex(std::string_view data) {
  uint8_t digest[SHA256_DIGEST_LENGTH];
  Sha256().add(data).finish(digest);
  return to_hex(digest, sizeof digest);
}

std::string token_digest(std::vector<std::string> tokens) {
  return token_digest_of_views(std::vector<std::string_view>(tokens.begin(), tokens.end()));
}

std::string token_digest_of_views(std::vector<std::string_view> tokens) {
  std::sort(tokens.begin(), tokens.end());
  Sha256 sha;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) sha.add("\n", 1);
    sha.add(tokens[i]);
  }
  uint8_t digest[SHA256_DIGEST_LENGTH];
  sha.finish(digest);
  return to_hex(digest, sizeof digest);
}

std::string random_id128() {
  uint8_t bytes[16];
  random_bytes(bytes, sizeof bytes);
  return to_hex(bytes, sizeof bytes);
}

}  // namespace vend::crypto
