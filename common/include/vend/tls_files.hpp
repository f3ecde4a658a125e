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

}  // namespace vend
