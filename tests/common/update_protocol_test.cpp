// The update messages (the `update` command, the `update_status` event), the
// version rules and the update key's Ed25519 signatures. The golden examples
// are the ones docs/protocol.md shows: change both together.
#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "test_support.hpp"
#include "vend/crypto.hpp"
#include "vend/protocol.hpp"
#include "vend/sha256_stream.hpp"
#include "vend/update_signature.hpp"

namespace vend::proto {
namespace {

using nlohmann::json;

// A test update key (never a real one): its private half signs the example.
constexpr const char* kUpdatePrivate =
    "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60";
constexpr const char* kUpdatePublic =
    "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a";
constexpr const char* kSha = "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef";
constexpr const char* kManifest =
    "vend-update-v1\nversion=0.2.0\nsize_bytes=1843200\nsha256="
    "5f70bf18a086007016e948b04aed3b82103a36bea41755b6cddfaf10ace3c6ef\n";
constexpr const char* kMac = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";

std::string signature() { return crypto::sign_update(kUpdatePrivate, kManifest).value(); }

UpdateCommand update() {
  return {"vm-0042",   "upd-0007",
          "0.2.0",     "https://updates.example.com/vend-firmware_0.2.0_arm64.deb",
          1843200,     kSha,
          signature(), 1700000060000};
}

DeviceEvent status_event(UpdateState state, std::string reason = "") {
  return DeviceEvent{"vm-0042", 48, "fedcba9876543210fedcba9876543210", 1700000001234,
                     UpdateStatus{"upd-0007", state, "0.2.0", std::move(reason)}};
}

std::string with(const std::string& payload, const std::string& key, json value) {
  json j = json::parse(payload);
  j[key] = std::move(value);
  return j.dump();
}

std::string without(const std::string& payload, const std::string& key) {
  json j = json::parse(payload);
  j.erase(key);
  return j.dump();
}

TEST_CASE("the update key: the test key's public half, manifest and signature") {
  CHECK(crypto::update_public_key_of(kUpdatePrivate).value() == kUpdatePublic);
  CHECK(crypto::update_manifest("0.2.0", 1843200, kSha) == kManifest);
  auto verifier = crypto::UpdateVerifier::from_hex(kUpdatePublic);
  REQUIRE(verifier.ok());
  CHECK(verifier->verify(kManifest, signature()));
  // Ed25519 is deterministic: the same key and manifest give the same bytes.
  CHECK(signature() == signature());
  CHECK(signature().size() == 128);
}

TEST_CASE("scripts/sign-update (openssl pkeyutl) and this code make the same signature") {
  // `scripts/sign-update sign KEY DEB 0.2.0` with the test key over a 6-byte
  // file "hello\n": Ed25519 is deterministic, so the bytes must be equal.
  const std::string manifest = crypto::update_manifest(
      "0.2.0", 6, "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03");
  CHECK(crypto::sign_update(kUpdatePrivate, manifest).value() ==
        "c470843386be5830fe226790b4ffef5832ba871bad5c1a7cc78da43c59e878af"
        "1e9747bf62892174417cdebbdf2e028cdab7e3a917f15eea51f939345f408607");
}

TEST_CASE("an update signature does not verify for another manifest, key or bytes") {
  auto verifier = crypto::UpdateVerifier::from_hex(kUpdatePublic).value();
  CHECK_FALSE(verifier.verify(crypto::update_manifest("0.2.1", 1843200, kSha), signature()));
  CHECK_FALSE(verifier.verify(crypto::update_manifest("0.2.0", 1843201, kSha), signature()));
  std::string flipped = signature();
  flipped[10] = flipped[10] == '0' ? '1' : '0';
  CHECK_FALSE(verifier.verify(kManifest, flipped));
  CHECK_FALSE(verifier.verify(kManifest, "abc"));
  auto other = crypto::generate_update_key();
  auto other_verifier = crypto::UpdateVerifier::from_hex(other.public_hex).value();
  CHECK_FALSE(other_verifier.verify(kManifest, signature()));
  CHECK(
      other_verifier.verify(kManifest, crypto::sign_update(other.private_hex, kManifest).value()));
}

TEST_CASE("update keys that are not 32 bytes of hex are refused, naming the key") {
  auto bad = crypto::UpdateVerifier::from_hex("abcd");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.error().code == "bad_key");
  CHECK(bad.error().message.find("update public key") != std::string::npos);
  CHECK_FALSE(crypto::sign_update("zz", kManifest).ok());
  auto missing = crypto::UpdateVerifier::load_file("/nonexistent/update.pub");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.error().message.find("/nonexistent/update.pub") != std::string::npos);
}

TEST_CASE("golden canonical form of the update command and its round trip") {
  const std::string golden =
      std::string(R"({"device":"vm-0042","expires_at_ms":1700000060000,"sha256":")") + kSha +
      R"(","signature":")" + signature() +
      R"(","size_bytes":1843200,"type":"update","update_id":"upd-0007","url":"https://updates.example.com/vend-firmware_0.2.0_arm64.deb","v":2,"version":"0.2.0"})";
  CHECK(encode_canonical(Command{update()}) == golden);
  auto decoded = decode_command(encode(Command{update()}, kMac));
  REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
  CHECK(decoded->message == Command{update()});
  CHECK(decoded->canonical == golden);
  CHECK(std::string(type_name(decoded->message)) == "update");
  CHECK(command_expires_at_ms(decoded->message) == 1700000060000);
}

TEST_CASE("golden canonical form of update_status and its round trip") {
  CHECK(
      encode_canonical(status_event(UpdateState::kInstalled)) ==
      R"({"boot_id":"fedcba9876543210fedcba9876543210","device":"vm-0042","reason":"","seq":48,"state":"installed","ts_ms":1700000001234,"type":"update_status","update_id":"upd-0007","v":1,"version":"0.2.0"})");
  for (UpdateState state :
       {UpdateState::kDownloading, UpdateState::kVerified, UpdateState::kInstalling,
        UpdateState::kInstalled, UpdateState::kFailed, UpdateState::kRolledBack}) {
    DeviceEvent event = status_event(state, state == UpdateState::kFailed ? "hash_mismatch" : "");
    auto decoded = decode_event(encode(event, kMac));
    REQUIRE_MESSAGE(decoded.ok(), vend::test::error_text(decoded));
    CHECK(decoded->message == event);
    CHECK(parse_update_state(to_string(state)) == state);
  }
}

struct Reject {
  const char* name;
  std::string payload;
  const char* code;
  const char* needle;
};

TEST_CASE("update commands are decoded strictly") {
  const std::string u = encode(Command{update()}, kMac);
  const Reject cases[] = {
      {"v1 update", with(u, "v", 1), kErrBadVersion, "only in v2"},
      {"no expiry", without(u, "expires_at_ms"), kErrMissingField, "'expires_at_ms'"},
      {"no signature", without(u, "signature"), kErrMissingField, "'signature'"},
      {"short signature", with(u, "signature", "abcd"), kErrOutOfRange, "'signature'"},
      {"upper-case signature", with(u, "signature", std::string(128, 'A')), kErrOutOfRange,
       "'signature'"},
      {"bad sha256", with(u, "sha256", "xyz"), kErrOutOfRange, "'sha256'"},
      {"size 0", with(u, "size_bytes", 0), kErrOutOfRange, "'size_bytes'"},
      {"size over the bound", with(u, "size_bytes", kMaxUpdateBytes + 1), kErrOutOfRange,
       "'size_bytes'"},
      {"size as string", with(u, "size_bytes", "12"), kErrWrongType, "'size_bytes'"},
      {"ftp url", with(u, "url", "ftp://x/y.deb"), kErrOutOfRange, "'url'"},
      {"url with a space", with(u, "url", "https://x/a b.deb"), kErrOutOfRange, "'url'"},
      {"url too long", with(u, "url", "https://" + std::string(kMaxUrlLength, 'a')), kErrOutOfRange,
       "'url'"},
      {"version with letters", with(u, "version", "1.2-rc1"), kErrOutOfRange, "'version'"},
      {"version with five numbers", with(u, "version", "1.2.3.4.5"), kErrOutOfRange, "'version'"},
      {"version empty part", with(u, "version", "1..2"), kErrOutOfRange, "'version'"},
      {"bad update id", with(u, "update_id", "a b"), kErrOutOfRange, "'update_id'"},
      {"unknown field", with(u, "force", true), kErrUnknownField, "'force'"},
  };
  for (const Reject& c : cases) {
    CAPTURE(c.name);
    auto decoded = decode_command(c.payload);
    REQUIRE_FALSE(decoded.ok());
    CHECK(decoded.error().code == c.code);
    CHECK_MESSAGE(decoded.error().message.find(c.needle) != std::string::npos,
                  decoded.error().message);
  }
}

TEST_CASE("update_status events are decoded strictly") {
  const std::string e = encode(status_event(UpdateState::kFailed, "x"), kMac);
  const Reject cases[] = {
      {"unknown state", with(e, "state", "exploded"), kErrOutOfRange, "'state'"},
      {"no reason", without(e, "reason"), kErrMissingField, "'reason'"},
      {"bad version", with(e, "version", "v2"), kErrOutOfRange, "'version'"},
      {"reason too long", with(e, "reason", std::string(kMaxTextLength + 1, 'r')), kErrOutOfRange,
       "'reason'"},
      {"as a command", e, kErrUnknownType, "'update_status'"},
  };
  for (const Reject& c : cases) {
    CAPTURE(c.name);
    auto decoded = std::string(c.name) == "as a command" ? decode_command(c.payload).error()
                                                         : decode_event(c.payload).error();
    CHECK(decoded.code == c.code);
    CHECK_MESSAGE(decoded.message.find(c.needle) != std::string::npos, decoded.message);
  }
}

TEST_CASE("versions: format and order number by number") {
  for (const char* good : {"0", "0.1.0", "1.2.3.4", "123456789.0"}) {
    CHECK_MESSAGE(is_valid_version(good), good);
  }
  for (const char* bad : {"", ".", "1.", ".1", "1..2", "1.2.3.4.5", "1.a", "1234567890", "-1"}) {
    CHECK_MESSAGE(!is_valid_version(bad), bad);
  }
  CHECK(compare_versions("1.10", "1.9") > 0);
  CHECK(compare_versions("1.2", "1.2.0") == 0);
  CHECK(compare_versions("0.1.0", "0.2.0") < 0);
  CHECK(compare_versions("2", "1.99.99") > 0);
}

TEST_CASE("SHA-256 in pieces equals SHA-256 at once") {
  std::string data(100'000, 'x');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  crypto::Sha256Stream stream;
  for (size_t at = 0; at < data.size(); at += 4093) stream.add(data.substr(at, 4093));
  CHECK(stream.size() == data.size());
  CHECK(stream.finish_hex() == crypto::sha256_hex(data));
}

}  // namespace
}  // namespace vend::proto
