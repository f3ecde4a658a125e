// The agent's secrets: the operator token, the gateway secret, the MQTT
// password and TLS files (shell_options.hpp has the contract).
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "shell/shell_options.hpp"
#include "vend/crypto.hpp"
#include "vend/file_modes.hpp"
#include "vend/secret_file.hpp"
#include "vend/tls_files.hpp"

namespace vend::agent {

namespace {

constexpr size_t kMinSecret = 16;
constexpr size_t kMaxSecret = 1024;
constexpr size_t kMaxMqttPassword = 1024;

std::string trim(const std::string& s) {
  const char* ws = " \t\r\n";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

Status check_secret(const std::string& secret, const std::string& where) {
  if (secret.size() < kMinSecret || secret.size() > kMaxSecret) {
    return make_error("bad_secret", where + ": must be " + std::to_string(kMinSecret) + ".." +
                                        std::to_string(kMaxSecret) + " characters");
  }
  for (unsigned char c : secret) {
    if (c <= 0x20 || c >= 0x7f) {
      return make_error("bad_secret", where + ": only printable ASCII, no spaces");
    }
  }
  return {};
}

// Writes a fresh secret to a new file, never overwriting one (O_EXCL).
Result<std::string> create_secret_file(const std::string& path) {
  std::string secret = crypto::Key::generate().to_hex();
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return make_error("bad_secret", path + ": cannot create: " + std::strerror(errno));
  std::string line = secret + "\n";
  bool ok = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ok = ::close(fd) == 0 && ok;
  if (!ok) return make_error("bad_secret", path + ": cannot write: " + std::strerror(errno));
  return secret;
}

Result<std::string> read_secret_file(const std::string& path, const char* what, std::ostream& out,
                                     MissingSecretFile missing) {
  if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) {
    if (missing == MissingSecretFile::kReport) {
      out << "vend-agent: " << path << " does not exist: vend-agent creates it with a new " << what
          << " at start\n";
      return std::string();
    }
    auto created = create_secret_file(path);
    if (created.ok()) out << "vend-agent: generated a new " << what << " in " << path << "\n";
    return created;
  }
  if (Status s = check_secret_file(path, std::string(what) + " file", "bad_secret"); !s.ok()) {
    return s.error();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error("bad_secret", path + ": cannot read: " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string secret = trim(ss.str());
  if (Status s = check_secret(secret, path); !s.ok()) return s.error();
  return secret;
}

// From the file option, else the variable; nullopt when neither is given.
Result<std::optional<std::string>> find_secret(const std::string& file, const char* env_name,
                                               const char* what, const GetEnv& getenv,
                                               std::ostream& out, MissingSecretFile missing) {
  if (!file.empty()) {
    auto s = read_secret_file(file, what, out, missing);
    if (!s.ok()) return s.error();
    return std::optional<std::string>(*s);
  }
  std::optional<std::string> value = getenv ? getenv(env_name) : std::nullopt;
  if (!value) return std::optional<std::string>();
  std::string secret = trim(*value);
  if (Status s = check_secret(secret, env_name); !s.ok()) return s.error();
  return std::optional<std::string>(secret);
}

// A TLS file Paho cannot read or parse would fail every connect attempt in
// the background; say so at start (and in --check-config) instead: each is
// read and parsed. The private key is a secret like the others.
Status check_tls_files(const ShellOptions& o) {
  return vend::check_tls_files({o.mqtt_ca_file, o.mqtt_cert_file, o.mqtt_key_file},
                               {.ca = "--mqtt-ca-file",
                                .cert = "--mqtt-cert-file",
                                .key = "--mqtt-key-file",
                                .code = "bad_file",
                                .key_code = "bad_file",
                                .secret_code = "bad_secret"});
}

}  // namespace

Result<Secrets> load_secrets(const ShellOptions& o, const GetEnv& getenv, std::ostream& out,
                             MissingSecretFile missing) {
  Secrets secrets;
  auto token = find_secret(o.operator_token_file, "VEND_OPERATOR_TOKEN", "operator token", getenv,
                           out, missing);
  if (!token.ok()) return token.error();
  if (token->has_value()) {
    secrets.operator_token = **token;
  } else if (!o.insecure_no_auth) {
    return make_error("no_secret",
                      "no operator token: give --operator-token-file FILE (created if missing), "
                      "set VEND_OPERATOR_TOKEN, or --insecure-no-auth for a local demo");
  }
  auto gateway = find_secret(o.gateway_secret_file, "VEND_GATEWAY_SECRET", "gateway secret", getenv,
                             out, missing);
  if (!gateway.ok()) return gateway.error();
  if (!gateway->has_value()) {
    return make_error("no_secret",
                      "no gateway secret: give --gateway-secret-file FILE (created if "
                      "missing) or set VEND_GATEWAY_SECRET");
  }
  secrets.gateway_secret = **gateway;
  if (!o.mqtt_password_file.empty()) {
    auto password = read_secret_line(o.mqtt_password_file, "--mqtt-password-file", "bad_secret",
                                     kMaxMqttPassword);
    if (!password.ok()) return password.error();
    secrets.mqtt_password = *password;
  }
  if (Status s = check_tls_files(o); !s.ok()) return s.error();
  return secrets;
}

}  // namespace vend::agent
