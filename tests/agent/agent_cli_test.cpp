// The real vend-agent binary's command line as an operator meets it: a
// configuration error is one line naming the problem (the usage only on
// --help), --version, and --check-config reading every TLS file it names: a
// CA or certificate file that holds no certificate and a key file that holds
// no key are refused, naming the option and the file.
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "test_support.hpp"

namespace vend::agent {
namespace {

using namespace std::chrono_literals;

struct Run {
  int code = -1;
  std::string output;  // stdout + stderr
};

Run agent(const test::TempDir& dir, std::vector<std::string> args) {
  args.insert(args.begin(), test::binary_path("cloud-agent/vend-agent"));
  const std::string log = dir.file("agent.out");
  std::filesystem::remove(log);
  test::Child child(args, log);
  const int code = child.wait(10s);
  return Run{code, test::read_file(log)};
}

size_t lines(const std::string& text) {
  size_t n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// A self-signed certificate and its key (openssl CLI), mode 0600 for the key.
void make_certificate(const test::TempDir& dir) {
  std::string openssl = test::require_program("openssl", "openssl");
  test::Child req({openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
                   "-nodes", "-keyout", dir.file("agent.key"), "-out", dir.file("ca.crt"), "-days",
                   "1", "-subj", "/CN=vend-test"},
                  dir.file("openssl.log"));
  REQUIRE_MESSAGE(req.wait(20s) == 0, test::read_file(dir.file("openssl.log")));
  std::filesystem::permissions(dir.file("agent.key"), std::filesystem::perms(0600));
}

std::vector<std::string> base_args(const test::TempDir& dir) {
  test::write_private_file(dir.file("operator.token"), std::string(32, 'o') + "\n");
  test::write_private_file(dir.file("gateway.secret"), std::string(32, 'g') + "\n");
  return {"--check-config",           "--db",
          dir.file("agent.db"),       "--operator-token-file",
          dir.file("operator.token"), "--gateway-secret-file",
          dir.file("gateway.secret")};
}

TEST_CASE("a configuration error is one line naming the problem; the usage only on --help") {
  test::TempDir dir;
  Run bad = agent(dir, {"--reservation-ttl-s", "0"});
  CHECK(bad.code == 2);
  CHECK_MESSAGE(lines(bad.output) == 1, bad.output);
  CHECK(bad.output.rfind("vend-agent: --reservation-ttl-s", 0) == 0);
  CHECK(bad.output.find("(see vend-agent --help)") != std::string::npos);

  Run unknown = agent(dir, {"--bogus"});
  CHECK(unknown.code == 2);
  CHECK_MESSAGE(lines(unknown.output) == 1, unknown.output);
  CHECK(unknown.output.find("unknown option '--bogus'") != std::string::npos);

  Run help = agent(dir, {"--help"});
  CHECK(help.code == 0);
  CHECK(lines(help.output) > 20);
  Run version = agent(dir, {"--version"});
  CHECK(version.code == 0);
  CHECK(version.output.rfind("vend-agent ", 0) == 0);
  CHECK(lines(version.output) == 1);
}

TEST_CASE("--check-config reads the TLS files: a CA that is not a certificate is refused") {
  test::TempDir dir;
  make_certificate(dir);
  std::vector<std::string> args = base_args(dir);
  for (const char* a : {"--mqtt", "ssl://127.0.0.1:8883", "--mqtt-ca-file"}) args.push_back(a);

  std::vector<std::string> good = args;
  good.push_back(dir.file("ca.crt"));
  Run ok = agent(dir, good);
  CHECK_MESSAGE(ok.code == 0, ok.output);
  CHECK(ok.output.find("configuration OK") != std::string::npos);

  test::write_file(dir.file("notacert.crt"), "notacert\n");
  std::vector<std::string> bad = args;
  bad.push_back(dir.file("notacert.crt"));
  Run refused = agent(dir, bad);
  CHECK(refused.code == 2);
  CHECK_MESSAGE(lines(refused.output) == 1, refused.output);
  CHECK_MESSAGE(refused.output.find("--mqtt-ca-file " + dir.file("notacert.crt") +
                                    ": holds no PEM certificate") != std::string::npos,
                refused.output);

  // A client certificate and key: each parsed; the key must be a key.
  std::vector<std::string> client = good;
  for (const std::string& a : {std::string("--mqtt-cert-file"), dir.file("ca.crt"),
                               std::string("--mqtt-key-file"), dir.file("agent.key")}) {
    client.push_back(a);
  }
  Run with_client = agent(dir, client);
  CHECK_MESSAGE(with_client.code == 0, with_client.output);
  test::write_private_file(dir.file("agent.key"), "notakey\n");
  Run bad_key = agent(dir, client);
  CHECK(bad_key.code == 2);
  CHECK_MESSAGE(bad_key.output.find("--mqtt-key-file " + dir.file("agent.key") +
                                    ": holds no PEM private key") != std::string::npos,
                bad_key.output);
  CHECK_FALSE(std::filesystem::exists(dir.file("agent.db")));  // checking creates nothing
}

}  // namespace
}  // namespace vend::agent
