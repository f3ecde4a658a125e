#include "accounts/password.hpp"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "vend/crypto.hpp"

namespace vend::agent::password {

namespace {

constexpr size_t kSaltBytes = 16;
constexpr size_t kKeyBytes = 32;
constexpr uint64_t kMaxN = uint64_t{1} << 20;  // refuse encodings that would take > 1 GiB

Result<std::vector<uint8_t>> derive(std::string_view password, const std::vector<uint8_t>& salt,
                                    const ScryptParams& params, size_t key_bytes) {
  std::unique_ptr<EVP_KDF, decltype(&EVP_KDF_free)> kdf(EVP_KDF_fetch(nullptr, "SCRYPT", nullptr),
                                                        &EVP_KDF_free);
  if (!kdf) return make_error("internal", "OpenSSL has no SCRYPT KDF");
  std::unique_ptr<EVP_KDF_CTX, decltype(&EVP_KDF_CTX_free)> ctx(EVP_KDF_CTX_new(kdf.get()),
                                                                &EVP_KDF_CTX_free);
  if (!ctx) return make_error("internal", "EVP_KDF_CTX_new failed");
  uint64_t n = params.n;
  uint32_t r = params.r;
  uint32_t p = params.p;
  uint64_t maxmem = 2 * 128 * n * r + (uint64_t{1} << 20);
  std::string pw(password);
  OSSL_PARAM ps[] = {
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_PASSWORD, pw.data(), pw.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, const_cast<uint8_t*>(salt.data()),
                                        salt.size()),
      OSSL_PARAM_construct_uint64(OSSL_KDF_PARAM_SCRYPT_N, &n),
      OSSL_PARAM_construct_uint32(OSSL_KDF_PARAM_SCRYPT_R, &r),
      OSSL_PARAM_construct_uint32(OSSL_KDF_PARAM_SCRYPT_P, &p),
      OSSL_PARAM_construct_uint64(OSSL_KDF_PARAM_SCRYPT_MAXMEM, &maxmem),
      OSSL_PARAM_construct_end()};
  std::vector<uint8_t> key(key_bytes);
  int ok = EVP_KDF_derive(ctx.get(), key.data(), key.size(), ps);
  OPENSSL_cleanse(pw.data(), pw.size());
  if (ok != 1) return make_error("internal", "scrypt failed");
  return key;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out(1);
  for (char c : text) {
    if (c == sep) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

bool parse_u64(const std::string& text, uint64_t& out) {
  if (text.empty() || text.size() > 10) return false;
  out = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

}  // namespace

Result<std::string> hash(std::string_view password, const ScryptParams& params) {
  std::vector<uint8_t> salt(kSaltBytes);
  crypto::random_bytes(salt.data(), salt.size());
  auto key = derive(password, salt, params, kKeyBytes);
  if (!key.ok()) return key.error();
  return "scrypt$" + std::to_string(params.n) + "$" + std::to_string(params.r) + "$" +
         std::to_string(params.p) + "$" + crypto::to_hex(salt.data(), salt.size()) + "$" +
         crypto::to_hex(key->data(), key->size());
}

bool verify(std::string_view password, const std::string& encoded) {
  std::vector<std::string> parts = split(encoded, '$');
  if (parts.size() != 6 || parts[0] != "scrypt") return false;
  uint64_t n = 0, r = 0, p = 0;
  if (!parse_u64(parts[1], n) || !parse_u64(parts[2], r) || !parse_u64(parts[3], p)) return false;
  if (n < 2 || n > kMaxN || (n & (n - 1)) != 0 || r < 1 || r > 32 || p < 1 || p > 16) return false;
  auto salt = crypto::from_hex(parts[4]);
  auto want = crypto::from_hex(parts[5]);
  if (!salt.ok() || !want.ok() || want->empty()) return false;
  ScryptParams params{n, static_cast<uint32_t>(r), static_cast<uint32_t>(p)};
  auto got = derive(password, *salt, params, want->size());
  if (!got.ok()) return false;
  return CRYPTO_memcmp(got->data(), want->data(), want->size()) == 0;
}

std::string weakness(std::string_view password) {
  if (password.size() < 12) return "a password must be at least 12 bytes";
  if (password.size() > 1024) return "a password must be at most 1024 bytes";
  return "";
}

}  // namespace vend::agent::password
