#include "vend/webhook.hpp"

#include <charconv>

#include "vend/crypto.hpp"

namespace vend::webhook {

namespace {

constexpr size_t kMacHex = 64;
constexpr size_t kMaxHeader = 1024;

std::string mac_hex(std::string_view secret, int64_t t_s, std::string_view subject,
                    std::string_view body) {
  std::string payload = std::to_string(t_s);
  payload.reserve(payload.size() + subject.size() + body.size() + 2);
  payload.append(".").append(subject).append(".").append(body);
  std::vector<uint8_t> key(secret.begin(), secret.end());
  std::vector<uint8_t> mac = crypto::hmac_sha256(key, payload);
  return crypto::to_hex(mac.data(), mac.size());
}

bool is_hex(std::string_view s) {
  for (char c : s) {
    bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if (!ok) return false;
  }
  return true;
}

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Compares two strings of equal size without an early exit.
bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Error malformed(const std::string& why) {
  return Error{"bad_signature",
               std::string(kHeader) + " " + why + " (expected 't=<unix seconds>,v1=<64 hex>')"};
}

}  // namespace

std::string sign(std::string_view secret, int64_t t_s, std::string_view subject,
                 std::string_view body) {
  return "t=" + std::to_string(t_s) + ",v1=" + mac_hex(secret, t_s, subject, body);
}

Result<Signature> parse(std::string_view header) {
  if (header.empty()) return malformed("is empty");
  if (header.size() > kMaxHeader) return malformed("is too long");
  Signature out;
  bool have_t = false;
  while (!header.empty()) {
    size_t comma = header.find(',');
    std::string_view item = header.substr(0, comma);
    header = comma == std::string_view::npos ? std::string_view() : header.substr(comma + 1);
    if (item.rfind("t=", 0) == 0) {
      std::string_view digits = item.substr(2);
      auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out.t_s);
      if (have_t || digits.empty() || ec != std::errc() || end != digits.data() + digits.size() ||
          out.t_s < 0) {
        return malformed("has a bad or repeated 't='");
      }
      have_t = true;
    } else if (item.rfind("v1=", 0) == 0) {
      std::string_view hex = item.substr(3);
      if (hex.size() != kMacHex || !is_hex(hex)) return malformed("has a bad 'v1='");
      out.v1.push_back(lowercase(hex));
    } else {
      return malformed("has an unknown part '" + std::string(item.substr(0, 16)) + "'");
    }
  }
  if (!have_t) return malformed("has no 't='");
  if (out.v1.empty()) return malformed("has no 'v1='");
  return out;
}

Result<int64_t> authenticate(std::string_view secret, std::string_view header,
                             std::string_view subject, std::string_view body) {
  auto sig = parse(header);
  if (!sig.ok()) return sig.error();
  std::string want = mac_hex(secret, sig->t_s, subject, body);
  bool match = false;
  for (const auto& v : sig->v1) match = constant_time_equal(want, v) || match;
  if (!match) {
    return Error{"bad_signature", std::string(kHeader) +
                                      " does not match: v1 must be the HMAC-SHA256 of "
                                      "'<t>.<subject>.<body>' under the gateway secret"};
  }
  return sig->t_s;
}

}  // namespace vend::webhook
