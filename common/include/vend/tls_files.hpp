// Checks of the TLS files a broker connection loads (Paho reads them only
// when it connects, in the background): each is read and parsed here with
// OpenSSL, so a wrong file is refused at start, or by --check-config, with
// a message naming the option and the path, instead of failing every
// connect attempt later. Nothing is changed.
#pragma once

#include <string>

#include "vend/result.hpp"

namespace vend {

// `path` must hold one or more PEM certificates ("-----BEGIN CERTIFICATE-----"),
// and nothing else that OpenSSL cannot parse. Errors (code `code`) name
// `what` and the path: "--mqtt-ca-file /etc/vend/ca.crt: holds no PEM
// certificate".
Status check_pem_certificates(const std::string& path, const std::string& what,
                              const std::string& code);

// `path` must hold a PEM private key that needs no passphrase.
Status check_pem_private_key(const std::string& path, const std::string& what,
                             const std::string& code);

// The TLS files of one broker connection; "" = not set, not checked.
struct TlsFiles {
  std::string ca_file;    // PEM CA certificates
  std::string cert_file;  // PEM client certificate(s)
  std::string key_file;   // PEM private key: a secret file (check_secret_file)
};

// How errors name the files (the option or config field a user wrote,
// "--mqtt-ca-file" or "tls_ca_file") and their error codes.
struct TlsFileNames {
  std::string ca;
  std::string cert;
  std::string key;
  std::string code;         // a file unreadable, or not holding what it should
  std::string key_code;     // a key file that holds no usable private key
  std::string secret_code;  // a key file readable by group or others
};

// Every set file is readable; the CA and certificate files hold PEM
// certificates (check_pem_certificates); the key file passes
// check_secret_file and holds a PEM private key without passphrase. The
// first failure is returned, in that order: "--mqtt-ca-file PATH: No such
// file or directory", "tls_key_file PATH: holds no PEM private key ...".
Status check_tls_files(const TlsFiles& files, const TlsFileNames& names);

}  // namespace vend
