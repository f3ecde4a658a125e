#include "broker_rig.hpp"

#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

namespace vend::test {

namespace {

std::string source_path(const std::string& relative) {
  const char* dir = std::getenv("VEND_SOURCE_DIR");
  if (dir == nullptr) throw std::runtime_error("VEND_SOURCE_DIR not set (run through ctest)");
  return std::string(dir) + "/" + relative;
}

// Replaces every `from` in `text`; a missing one means the shipped file
// changed under the test, which must then be updated, not silently pass.
void substitute(std::string& text, const std::string& from, const std::string& to) {
  size_t at = text.find(from);
  if (at == std::string::npos) {
    throw std::runtime_error("deploy/mosquitto/mosquitto.conf: '" + from + "' not found");
  }
  for (; at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

void run_ok(const std::vector<std::string>& argv, const std::string& log_path) {
  Child child(argv, log_path);
  int code = child.wait(std::chrono::seconds(20));
  if (code != 0) {
    throw std::runtime_error(argv[0] + " failed (exit " + std::to_string(code) +
                             "): " + read_file(log_path));
  }
}

SecureBroker::SecureBroker(const std::vector<std::string>& users)
    : plain_port_(free_port()), tls_port_(free_port()) {
  make_certificates();
  write_file(dir_.file("acl"), read_file(source_path("deploy/mosquitto/acl")));
  for (const std::string& user : users) add_user(user);  // an instance's grants into acl
  write_config();
  broker_ =
      std::make_unique<Child>(std::vector<std::string>{require_program("mosquitto", "mosquitto"),
                                                       "-c", dir_.file("mosquitto.conf")},
                              dir_.file("broker.log"));
  if (!wait_for_port(plain_port_, std::chrono::seconds(10)) ||
      !wait_for_port(tls_port_, std::chrono::seconds(10))) {
    throw std::runtime_error("mosquitto did not start: " + log());
  }
}

// The commands of docs/deployment.md, with a one-day validity.
void SecureBroker::make_certificates() {
  std::string openssl = require_program("openssl", "openssl");
  std::string log = dir_.file("openssl.log");
  const std::vector<std::string> ec = {"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                                       "-nodes"};
  std::vector<std::string> ca = {openssl, "req", "-x509"};
  ca.insert(ca.end(), ec.begin(), ec.end());
  ca.insert(ca.end(), {"-keyout", dir_.file("ca.key"), "-out", ca_file(), "-days", "1", "-subj",
                       "/CN=vend-test-ca"});
  run_ok(ca, log);
  std::vector<std::string> csr = {openssl, "req"};
  csr.insert(csr.end(), ec.begin(), ec.end());
  csr.insert(csr.end(), {"-keyout", dir_.file("server.key"), "-out", dir_.file("server.csr"),
                         "-subj", "/CN=localhost"});
  run_ok(csr, log);
  write_file(dir_.file("server.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n");
  run_ok({openssl, "x509", "-req", "-in", dir_.file("server.csr"), "-CA", ca_file(), "-CAkey",
          dir_.file("ca.key"), "-CAcreateserial", "-out", dir_.file("server.crt"), "-days", "1",
          "-extfile", dir_.file("server.ext")},
         log);
}

void SecureBroker::add_user(const std::string& user) {
  std::vector<std::string> role = {user};
  std::string username = user == "agent" ? "vend-agent" : "vend-operator";
  if (user.rfind("device:", 0) == 0) {
    username = user.substr(7);
    role = {"device", username};
  } else if (user.rfind("agent:", 0) == 0) {
    username = "vend-agent-" + user.substr(6);
    role = {"agent", user.substr(6)};
  }
  std::string secret = dir_.file(username + ".password");
  std::vector<std::string> argv = {source_path("deploy/mosquitto/add-user"),
                                   "--passwd",
                                   dir_.file("passwd"),
                                   "--acl",
                                   dir_.file("acl"),
                                   "--secret-out",
                                   secret};
  argv.insert(argv.end(), role.begin(), role.end());
  run_ok(argv, dir_.file("add-user.log"));
  password_files_[username] = secret;
}

void SecureBroker::write_config() {
  std::string conf = read_file(source_path("deploy/mosquitto/mosquitto.conf"));
  substitute(conf, "/etc/mosquitto/vend/", dir_.path() + "/");
  substitute(conf, "persistence_location /var/lib/mosquitto/",
             "persistence_location " + dir_.path() + "/");
  substitute(conf, "log_dest file /var/log/mosquitto/mosquitto.log", "log_dest stderr");
  substitute(conf, "\nlistener 8883\n", "\nlistener " + std::to_string(tls_port_) + " 127.0.0.1\n");
  substitute(conf, "\nlistener 1883 127.0.0.1\n",
             "\nlistener " + std::to_string(plain_port_) + " 127.0.0.1\n");
  conf += "\nlog_type debug\n";  // "Denied PUBLISH ..." lines, for a failing test's log
  // As root, mosquitto would switch to user mosquitto, which cannot read the
  // test's private temp dir (production: files owned root:mosquitto, 0640).
  if (geteuid() == 0) conf += "user root\n";
  write_file(dir_.file("mosquitto.conf"), conf);
}

std::string SecureBroker::password_file(const std::string& username) const {
  auto it = password_files_.find(username);
  if (it == password_files_.end()) throw std::runtime_error("no credential for " + username);
  return it->second;
}

std::string SecureBroker::password(const std::string& username) const {
  std::string text = read_file(password_file(username));
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return text;
}

MqttClient::MqttClient(PahoOptions options, Logger& log)
    : transport_(std::make_unique<PahoTransport>(std::move(options), log)) {
  transport_->on_message([this](const Message& m) {
    std::lock_guard<std::mutex> lock(mu_);
    messages_.push_back(m);
    cv_.notify_all();
  });
  transport_->on_connection([this](bool up) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!up) ++losses_;
  });
}

bool MqttClient::wait_for(const std::string& topic, const std::string& payload,
                          std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] {
    for (const Message& m : messages_) {
      if (m.topic == topic && m.payload == payload) return true;
    }
    return false;
  });
}

bool MqttClient::received(const std::string& topic, const std::string& payload) {
  return wait_for(topic, payload, std::chrono::milliseconds(0));
}

std::vector<Message> MqttClient::received_under(const std::string& prefix) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Message> out;
  for (const Message& m : messages_) {
    if (m.topic.rfind(prefix, 0) == 0) out.push_back(m);
  }
  return out;
}

int MqttClient::connection_losses() {
  std::lock_guard<std::mutex> lock(mu_);
  return losses_;
}

PahoOptions client_options(const SecureBroker& broker, const std::string& url,
                           const std::string& username, const std::string& client_id) {
  PahoOptions o;
  o.server_uri = url;
  o.client_id = client_id;
  o.clean_session = true;
  o.connect_timeout = std::chrono::milliseconds(3000);
  if (!username.empty()) {
    o.username = username;
    o.password = broker.password(username);
  }
  if (url.rfind("ssl://", 0) == 0) o.tls = PahoTlsOptions{broker.ca_file(), "", ""};
  return o;
}

}  // namespace vend::test
