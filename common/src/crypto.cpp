#include "vend/crypto.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>

#include <algorithm>
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

void random_bytes(uint8_t* out, size_t n) {
  // RAND_bytes failing means the OS entropy source is broken: a bug-class
  // condition we must not paper over with weak ids.
  if (RAND_bytes(out, static_cast<int>(n)) != 1) {
    std::abort();
  }
}

}  // namespace

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
  std::vector<uint8_t> out(EVP_MAX_MD_SIZE);
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), out.data(), &len);
  out.resize(len);
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
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
  return to_hex(digest, sizeof digest);
}

std::string token_digest(std::vector<std::string> tokens) {
  return token_digest_of_views(std::vector<std::string_view>(tokens.begin(), tokens.end()));
}

std::string token_digest_of_views(std::vector<std::string_view> tokens) {
  std::sort(tokens.begin(), tokens.end());
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (i > 0) EVP_DigestUpdate(ctx, "\n", 1);
    EVP_DigestUpdate(ctx, tokens[i].data(), tokens[i].size());
  }
  uint8_t digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx, digest, &len);
  EVP_MD_CTX_free(ctx);
  return to_hex(digest, len);
}

std::string random_id128() {
  uint8_t bytes[16];
  random_bytes(bytes, sizeof bytes);
  return to_hex(bytes, sizeof bytes);
}

}  // namespace vend::crypto
