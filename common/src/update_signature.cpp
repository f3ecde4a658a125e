// Ed25519 through OpenSSL's EVP interface (EVP_DigestSign/EVP_DigestVerify
// with no digest: Ed25519 hashes internally). Unlike crypto.cpp this uses
// EVP: there is no low-level Ed25519 API, and a device pays the provider
// framework's memory only when an update arrives.
#include "vend/update_signature.hpp"

#include <openssl/evp.h>

#include <cctype>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "vend/crypto.hpp"

namespace vend::crypto {

namespace {

constexpr size_t kKeyBytes = 32;
constexpr size_t kSignatureBytes = 64;

struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;

Result<std::vector<uint8_t>> key_bytes(std::string_view hex, const char* what) {
  while (!hex.empty() && std::isspace(static_cast<unsigned char>(hex.front())))
    hex.remove_prefix(1);
  while (!hex.empty() && std::isspace(static_cast<unsigned char>(hex.back()))) hex.remove_suffix(1);
  auto bytes = from_hex(hex);
  if (!bytes.ok() || bytes->size() != kKeyBytes) {
    return Error{"bad_key", std::string(what) + " must be 64 hex chars (a raw Ed25519 key)"};
  }
  return bytes;
}

Result<Pkey> private_key(std::string_view private_hex) {
  auto seed = key_bytes(private_hex, "update private key");
  if (!seed.ok()) return seed.error();
  Pkey key(EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, nullptr, seed->data(), seed->size()));
  if (!key) return Error{"bad_key", "OpenSSL refused the update private key"};
  return key;
}

std::string raw_public_hex(EVP_PKEY* key) {
  std::vector<uint8_t> out(kKeyBytes);
  size_t size = out.size();
  EVP_PKEY_get_raw_public_key(key, out.data(), &size);
  return to_hex(out.data(), size);
}

}  // namespace

std::string update_manifest(std::string_view version, uint64_t size_bytes,
                            std::string_view sha256_hex) {
  std::ostringstream out;
  out << "vend-update-v1\nversion=" << version << "\nsize_bytes=" << size_bytes
      << "\nsha256=" << sha256_hex << "\n";
  return out.str();
}

UpdateKeyPair generate_update_key() {
  std::vector<uint8_t> seed(kKeyBytes);
  random_bytes(seed.data(), seed.size());
  UpdateKeyPair pair;
  pair.private_hex = to_hex(seed.data(), seed.size());
  pair.public_hex = update_public_key_of(pair.private_hex).value();
  return pair;
}

Result<std::string> update_public_key_of(std::string_view private_hex) {
  auto key = private_key(private_hex);
  if (!key.ok()) return key.error();
  return raw_public_hex(key->get());
}

Result<std::string> sign_update(std::string_view private_hex, std::string_view manifest) {
  auto key = private_key(private_hex);
  if (!key.ok()) return key.error();
  MdCtx ctx(EVP_MD_CTX_new());
  std::vector<uint8_t> signature(kSignatureBytes);
  size_t size = signature.size();
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr, key->get()) != 1 ||
      EVP_DigestSign(ctx.get(), signature.data(), &size,
                     reinterpret_cast<const unsigned char*>(manifest.data()),
                     manifest.size()) != 1) {
    return Error{"sign_failed", "OpenSSL could not sign the update manifest"};
  }
  return to_hex(signature.data(), size);
}

Result<UpdateVerifier> UpdateVerifier::from_hex(std::string_view public_hex) {
  auto bytes = key_bytes(public_hex, "update public key");
  if (!bytes.ok()) return bytes.error();
  Pkey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, bytes->data(), bytes->size()));
  if (!key) return Error{"bad_key", "OpenSSL refused the update public key"};
  return UpdateVerifier(to_hex(bytes->data(), bytes->size()));
}

Result<UpdateVerifier> UpdateVerifier::load_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"bad_key", "cannot read update public key file " + path};
  std::stringstream text;
  text << in.rdbuf();
  auto verifier = from_hex(text.str());
  if (!verifier.ok()) return Error{"bad_key", path + ": " + verifier.error().message};
  return verifier;
}

bool UpdateVerifier::verify(std::string_view manifest, std::string_view signature_hex) const {
  auto signature = crypto::from_hex(signature_hex);
  auto bytes = crypto::from_hex(public_hex_);
  if (!signature.ok() || signature->size() != kSignatureBytes || !bytes.ok()) return false;
  Pkey key(EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr, bytes->data(), bytes->size()));
  MdCtx ctx(EVP_MD_CTX_new());
  if (!key || !ctx) return false;
  if (EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr, nullptr, key.get()) != 1) return false;
  return EVP_DigestVerify(ctx.get(), signature->data(), signature->size(),
                          reinterpret_cast<const unsigned char*>(manifest.data()),
                          manifest.size()) == 1;
}

}  // namespace vend::crypto
