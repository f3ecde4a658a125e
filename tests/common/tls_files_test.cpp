// check_tls_files: every set file readable, certificates and key parsed,
// the key a secret file; errors name the option and the path, with the
// caller's codes. A self-signed certificate (openssl req) serves as CA and
// client certificate.
#include "vend/tls_files.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;

const vend::TlsFileNames kNames{.ca = "--ca",
                                .cert = "--cert",
                                .key = "--key",
                                .code = "bad_file",
                                .key_code = "bad_key",
                                .secret_code = "bad_secret"};

// A P-256 key (mode 0600) and its self-signed certificate in `dir`.
vend::TlsFiles make_files(const vend::test::TempDir& dir) {
  vend::test::Child req(
      {vend::test::require_program("openssl", "openssl"), "req", "-x509", "-newkey", "ec",
       "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", dir.file("tls.key"), "-out",
       dir.file("tls.crt"), "-days", "1", "-subj", "/CN=vend-test"},
      dir.file("openssl.log"));
  REQUIRE(req.wait(20s) == 0);
  std::filesystem::permissions(dir.file("tls.key"), std::filesystem::perms(0600));
  return {dir.file("tls.crt"), dir.file("tls.crt"), dir.file("tls.key")};
}

}  // namespace

TEST_CASE("no files set: nothing to check") { CHECK(vend::check_tls_files({}, kNames).ok()); }

TEST_CASE("a CA, a client certificate and a private secret key pass") {
  vend::test::TempDir dir;
  CHECK(vend::check_tls_files(make_files(dir), kNames).ok());
}

TEST_CASE("each failure names its option and path, with the caller's code") {
  vend::test::TempDir dir;
  vend::TlsFiles good = make_files(dir);

  vend::TlsFiles missing = good;
  missing.key_file = dir.file("absent.key");
  vend::Status s = vend::check_tls_files(missing, kNames);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "bad_file");
  CHECK(s.error().message == "--key " + missing.key_file + ": No such file or directory");

  vend::test::write_file(dir.file("notacert.crt"), "notacert\n");
  vend::TlsFiles bad_cert = good;
  bad_cert.cert_file = dir.file("notacert.crt");
  s = vend::check_tls_files(bad_cert, kNames);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "bad_file");
  CHECK(s.error().message.find("--cert " + bad_cert.cert_file + ": holds no PEM certificate") == 0);

  std::filesystem::permissions(good.key_file, std::filesystem::perms(0640));
  s = vend::check_tls_files(good, kNames);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "bad_secret");
  CHECK(s.error().message.find("--key " + good.key_file + " has mode 0640") == 0);

  vend::test::write_private_file(good.key_file, "notakey\n");
  s = vend::check_tls_files(good, kNames);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == "bad_key");
  CHECK(s.error().message.find("--key " + good.key_file + ": holds no PEM private key") == 0);
}
