// The production broker of deploy/mosquitto/ started for a test, and MQTT
// clients that record what they receive. Used by the deploy tests only.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "test_support.hpp"
#include "vend/log.hpp"
#include "vend/paho_transport.hpp"

namespace vend::test {

// mosquitto running the SHIPPED deploy/mosquitto/mosquitto.conf and acl, with
// only what a test must change substituted: /etc/mosquitto/vend/ and
// /var/lib/mosquitto/ become a temp dir, the two listeners move to free
// loopback ports, the log goes to a file (debug level, to read on failure).
// A throwaway CA and server certificate (EC P-256, CN localhost, SAN
// 127.0.0.1) are made with the openssl CLI, and one credential per user with
// deploy/mosquitto/add-user (so that script is tested too). Users: "agent",
// "agent:<instance>" (vend-agent-<instance>, its grants appended to the
// acl), "operator", or "device:<id>". Throws (failing the test) when a tool is
// missing or the broker does not start. Stopped on destruction.
class SecureBroker {
 public:
  explicit SecureBroker(const std::vector<std::string>& users);
  SecureBroker(const SecureBroker&) = delete;
  SecureBroker& operator=(const SecureBroker&) = delete;

  std::string plain_url() const { return "tcp://127.0.0.1:" + std::to_string(plain_port_); }
  std::string tls_url() const { return "ssl://127.0.0.1:" + std::to_string(tls_port_); }
  std::string ca_file() const { return dir_.file("ca.crt"); }
  // The file add-user wrote the password of `username` to (one line).
  std::string password_file(const std::string& username) const;
  std::string password(const std::string& username) const;
  std::string log() const { return read_file(dir_.file("broker.log")); }
  const TempDir& dir() const { return dir_; }

 private:
  void make_certificates();
  void add_user(const std::string& user);
  void write_config();

  TempDir dir_;
  int plain_port_;
  int tls_port_;
  std::map<std::string, std::string> password_files_;  // username -> file
  std::unique_ptr<Child> broker_;
};

// Runs a command to completion (20 s at most); throws with its output when it
// fails.
void run_ok(const std::vector<std::string>& argv, const std::string& log_path);

// One PahoTransport and everything it received; handlers only record.
// Non-copyable.
class MqttClient {
 public:
  MqttClient(PahoOptions options, Logger& log);
  MqttClient(const MqttClient&) = delete;
  MqttClient& operator=(const MqttClient&) = delete;

  PahoTransport& transport() { return *transport_; }
  Status connect() { return transport_->connect(); }
  Status publish(const std::string& topic, const std::string& payload, bool retained = false) {
    return transport_->publish(Message{topic, payload, 1, retained});
  }
  // True once a message with this topic and payload has arrived.
  bool wait_for(const std::string& topic, const std::string& payload,
                std::chrono::milliseconds timeout);
  bool received(const std::string& topic, const std::string& payload);
  // Every message received so far on topics starting with `prefix`.
  std::vector<Message> received_under(const std::string& prefix);
  int connection_losses();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Message> messages_;
  int losses_ = 0;
  std::unique_ptr<PahoTransport> transport_;  // last: its threads stop first
};

// Options for `client_id` at `url` with the broker's credentials of
// `username` ("" : anonymous), TLS with the broker's CA for ssl:// URLs.
PahoOptions client_options(const SecureBroker& broker, const std::string& url,
                           const std::string& username, const std::string& client_id);

}  // namespace vend::test
