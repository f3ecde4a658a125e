// Permission checks of files that hold secrets or configuration. Used by the
// firmware (device key, MQTT password, TLS key) and the agent (its config
// file and secret files). Only stat(2); nothing is read or changed.
#pragma once

#include <string>

#include "vend/result.hpp"

namespace vend {

// A secret file (a key, a password, a token) must exist and have no
// permission bits for group or others. The error (code `code`) names `what`,
// the path and its mode: "key file /etc/vend/key has mode 0644: must not be
// readable by group or others (chmod 600)".
Status check_secret_file(const std::string& path, const std::string& what, const std::string& code);

// A config file others could rewrite would let them change what the process
// trusts: it must exist and must not be writable by group or others. The
// error (code `code`) names `what`, the path and its mode.
Status check_config_file_mode(const std::string& path, const std::string& what,
                              const std::string& code);

}  // namespace vend
