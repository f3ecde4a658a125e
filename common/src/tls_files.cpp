#include "vend/tls_files.hpp"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <utility>

#include "vend/file_modes.hpp"

namespace vend {

namespace {

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
using Bio = std::unique_ptr<BIO, BioFree>;

// The file as a BIO; an error naming it when it cannot be opened.
Result<Bio> open_file(const std::string& path, const std::string& what, const std::string& code) {
  errno = 0;
  Bio bio(BIO_new_file(path.c_str(), "r"));
  if (!bio) {
    ERR_clear_error();
    std::string why = errno != 0 ? std::strerror(errno) : "cannot open";
    return make_error(code, what + " " + path + ": " + why);
  }
  return bio;
}

// No passphrase prompt on the terminal: an encrypted key is refused.
int no_passphrase(char*, int, int, void*) { return -1; }

}  // namespace

Status check_pem_certificates(const std::string& path, const std::string& what,
                              const std::string& code) {
  auto bio = open_file(path, what, code);
  if (!bio.ok()) return bio.error();
  int count = 0;
  while (X509* cert = PEM_read_bio_X509(bio->get(), nullptr, no_passphrase, nullptr)) {
    X509_free(cert);
    ++count;
  }
  // The loop ends at the end of the file (PEM_R_NO_START_LINE) or at a
  // block that is not a certificate.
  unsigned long last = ERR_peek_last_error();
  bool clean_end = ERR_GET_LIB(last) == ERR_LIB_PEM && ERR_GET_REASON(last) == PEM_R_NO_START_LINE;
  ERR_clear_error();
  if (count == 0) {
    return make_error(code, what + " " + path + ": holds no PEM certificate (expected " +
                                "-----BEGIN CERTIFICATE-----)");
  }
  if (!clean_end && last != 0) {
    return make_error(code, what + " " + path + ": certificate " + std::to_string(count + 1) +
                                " cannot be parsed");
  }
  return {};
}

Status check_pem_private_key(const std::string& path, const std::string& what,
                             const std::string& code) {
  auto bio = open_file(path, what, code);
  if (!bio.ok()) return bio.error();
  EVP_PKEY* key = PEM_read_bio_PrivateKey(bio->get(), nullptr, no_passphrase, nullptr);
  ERR_clear_error();
  if (key == nullptr) {
    return make_error(
        code, what + " " + path + ": holds no PEM private key that opens without a passphrase");
  }
  EVP_PKEY_free(key);
  return {};
}

Status check_tls_files(const TlsFiles& files, const TlsFileNames& names) {
  const std::pair<const std::string*, const std::string*> all[] = {
      {&names.ca, &files.ca_file}, {&names.cert, &files.cert_file}, {&names.key, &files.key_file}};
  for (auto [name, path] : all) {
    if (!path->empty() && ::access(path->c_str(), R_OK) != 0) {
      return make_error(names.code, *name + " " + *path + ": " + std::strerror(errno));
    }
  }
  if (!files.ca_file.empty()) {
    if (Status s = check_pem_certificates(files.ca_file, names.ca, names.code); !s.ok()) return s;
  }
  if (!files.cert_file.empty()) {
    if (Status s = check_pem_certificates(files.cert_file, names.cert, names.code); !s.ok()) {
      return s;
    }
  }
  if (files.key_file.empty()) return {};
  if (Status s = check_secret_file(files.key_file, names.key, names.secret_code); !s.ok()) return s;
  return check_pem_private_key(files.key_file, names.key, names.key_code);
}

}  // namespace vend
