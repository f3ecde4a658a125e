#include "vend/crypto.hpp"

#include <doctest/doctest.h>

#include <string>

#include "test_support.hpp"
#include "vend/webhook.hpp"

using namespace vend::crypto;
namespace webhook = vend::webhook;

namespace {
std::vector<uint8_t> bytes_of(const std::string& hex) { return from_hex(hex).value(); }
std::string hex_of(const std::vector<uint8_t>& v) { return to_hex(v.data(), v.size()); }
std::string repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}
std::string str_of_hex(const std::string& hex) {
  auto b = bytes_of(hex);
  return std::string(b.begin(), b.end());
}
}  // namespace

TEST_CASE("HMAC-SHA256 matches the RFC 4231 test vectors") {
  struct Vector {
    std::string key_hex, data, mac_hex;
    size_t truncate = 0;
  };
  const std::vector<Vector> vectors = {
      // Test case 1
      {repeat("0b", 20), "Hi There",
       "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      // Test case 2
      {"4a656665", "what do ya want for nothing?",
       "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      // Test case 3
      {repeat("aa", 20), str_of_hex(repeat("dd", 50)),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      // Test case 4
      {"0102030405060708090a0b0c0d0e0f10111213141516171819", str_of_hex(repeat("cd", 50)),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      // Test case 5 (truncated to 128 bits)
      {repeat("0c", 20), "Test With Truncation", "a3b6167473100ee06e0c796c2955552b", 16},
      // Test case 6
      {repeat("aa", 131), "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      // Test case 7
      {repeat("aa", 131),
       "This is a test using a larger than block-size key and a larger than block-size data. "
       "The key needs to be hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (const auto& v : vectors) {
    auto mac = hmac_sha256(bytes_of(v.key_hex), v.data);
    if (v.truncate) mac.resize(v.truncate);
    CHECK(hex_of(mac) == v.mac_hex);
  }
}

TEST_CASE("sign and verify: constant-time compare accepts the MAC and rejects any change") {
  Key key = Key::generate();
  std::string msg = R"({"type":"dispense","v":1})";
  std::string mac = sign(key, msg);
  CHECK(mac.size() == 64);
  CHECK(verify(key, msg, mac));
  std::string flipped = mac;
  flipped[10] = flipped[10] == 'a' ? 'b' : 'a';
  CHECK_FALSE(verify(key, msg, flipped));
  CHECK_FALSE(verify(key, msg + " ", mac));
  CHECK_FALSE(verify(key, msg, mac.substr(0, 63)));
  CHECK_FALSE(verify(key, msg, ""));
  CHECK_FALSE(verify(Key::generate(), msg, mac));
  CHECK_FALSE(verify(Key(), msg, mac));
}

TEST_CASE("keys load from hex with clear errors") {
  auto ok = Key::from_hex("  00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n");
  REQUIRE(ok.ok());
  CHECK(ok->bytes().size() == 32);
  CHECK(ok->to_hex() == "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");

  auto odd = Key::from_hex("abc");
  REQUIRE_FALSE(odd.ok());
  CHECK(odd.error().code == "bad_key");
  CHECK(odd.error().message.find("odd") != std::string::npos);

  auto bad_char = Key::from_hex("00112233445566778899aabbccddeeffzz");
  REQUIRE_FALSE(bad_char.ok());
  CHECK(bad_char.error().message.find("position 32") != std::string::npos);

  auto short_key = Key::from_hex("0011");
  REQUIRE_FALSE(short_key.ok());
  CHECK(short_key.error().message.find("too short") != std::string::npos);

  vend::test::TempDir dir;
  auto missing = Key::load_file(dir.file("nope.key"));
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("nope.key") != std::string::npos);

  vend::test::write_file(dir.file("dev.key"), Key::generate().to_hex() + "\n");
  CHECK(Key::load_file(dir.file("dev.key")).ok());
}

TEST_CASE("random ids are 128-bit lowercase hex and distinct") {
  std::string a = random_id128();
  std::string b = random_id128();
  CHECK(a.size() == 32);
  CHECK(a != b);
  CHECK(a.find_first_not_of("0123456789abcdef") == std::string::npos);
}

TEST_CASE("token digest is order-independent and sensitive to membership") {
  std::vector<std::string> t = {random_id128(), random_id128(), random_id128()};
  std::vector<std::string> r = {t[2], t[0], t[1]};
  CHECK(token_digest(t) == token_digest(r));
  CHECK(token_digest(t) != token_digest({t[0], t[1]}));
  CHECK(token_digest({}) == sha256_hex(""));
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// ---- signed webhooks (vend/webhook.hpp) ----

TEST_CASE("webhook signatures bind the subject, the time and the body") {
  const std::string body = R"({"payment_id":"p-1","amount_cents":150})";
  std::string header = webhook::sign("secret", 1'700'000'000, "ord-a", body);
  CHECK(header.rfind("t=1700000000,v1=", 0) == 0);
  auto ok = webhook::authenticate("secret", header, "ord-a", body);
  REQUIRE(ok.ok());
  CHECK(*ok == 1'700'000'000);  // the signed time, for the caller to judge
  CHECK(webhook::authenticate("secret", header, "ord-b", body).error().code == "bad_signature");
  CHECK(webhook::authenticate("secret", header, "ord-a", body + " ").error().code ==
        "bad_signature");
  CHECK(webhook::authenticate("other", header, "ord-a", body).error().code == "bad_signature");
  // Another time with the same mac: the time is signed.
  std::string moved = "t=1700000001" + header.substr(header.find(','));
  auto bad = webhook::authenticate("secret", moved, "ord-a", body);
  CHECK(bad.error().code == "bad_signature");
  CHECK(bad.error().message.find("does not match") != std::string::npos);
  // Rotation: any one matching v1 suffices, wherever it is.
  std::string mac = header.substr(header.find(",v1=") + 4);
  for (const std::string& rotated : {"t=1700000000,v1=" + std::string(64, 'a') + ",v1=" + mac,
                                     "t=1700000000,v1=" + mac + ",v1=" + std::string(64, 'a')}) {
    INFO(rotated);
    CHECK(webhook::authenticate("secret", rotated, "ord-a", body).ok());
  }
  CHECK(webhook::authenticate("secret", "t=1700000000,v1=" + std::string(64, 'a'), "ord-a", body)
            .error()
            .code == "bad_signature");
}

TEST_CASE("webhook headers are parsed strictly") {
  for (const char* bad :
       {"", "v1=00", "t=1", "t=x,v1=", "t=1,t=2,v1=", "t=-5,v1=", "t=1,v2=abc", "t=1,v1=zz"}) {
    INFO(bad);
    CHECK(webhook::parse(bad).error().code == "bad_signature");
  }
  auto ok = webhook::parse("t=5,v1=" + std::string(64, 'A'));
  REQUIRE(ok.ok());
  CHECK(ok->t_s == 5);
  CHECK(ok->v1.front() == std::string(64, 'a'));
}
