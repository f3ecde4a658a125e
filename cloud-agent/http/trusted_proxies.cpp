// IpAddress and TrustedProxies (trusted_proxies.hpp).
#include "http/trusted_proxies.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <cstring>

namespace vend::agent {

namespace {

constexpr std::array<uint8_t, 12> kMappedPrefix = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool in_block(const IpAddress& a, const IpAddress& base, int prefix_bits) {
  for (int bit = 0; bit < prefix_bits; bit += 8) {
    int bits = prefix_bits - bit < 8 ? prefix_bits - bit : 8;
    auto mask = static_cast<uint8_t>(0xff << (8 - bits));
    if ((a.bytes[bit / 8] & mask) != (base.bytes[bit / 8] & mask)) return false;
  }
  return true;
}

Error bad_entry(std::string_view entry, const std::string& why) {
  return make_error("bad_usage",
                    "--trusted-proxy: '" + std::string(entry.substr(0, 80)) + "' " + why);
}

}  // namespace

std::optional<IpAddress> IpAddress::parse(std::string_view text) {
  if (text.size() > 2 && text.front() == '[' && text.back() == ']') {
    text = text.substr(1, text.size() - 2);
    if (text.find(':') == std::string_view::npos) return std::nullopt;  // [v4]
  }
  if (text.empty() || text.size() >= INET6_ADDRSTRLEN) return std::nullopt;
  std::string s(text);
  IpAddress out;
  in_addr v4{};
  if (inet_pton(AF_INET, s.c_str(), &v4) == 1) {
    std::copy(kMappedPrefix.begin(), kMappedPrefix.end(), out.bytes.begin());
    std::memcpy(out.bytes.data() + 12, &v4, 4);
    return out;
  }
  if (inet_pton(AF_INET6, s.c_str(), out.bytes.data()) == 1) return out;
  return std::nullopt;
}

bool IpAddress::is_v4() const {
  return std::equal(kMappedPrefix.begin(), kMappedPrefix.end(), bytes.begin());
}

std::string IpAddress::to_string() const {
  char text[INET6_ADDRSTRLEN] = {0};
  if (is_v4()) {
    inet_ntop(AF_INET, bytes.data() + 12, text, sizeof text);
  } else {
    inet_ntop(AF_INET6, bytes.data(), text, sizeof text);
  }
  return text;
}

Result<TrustedProxies> TrustedProxies::parse(std::string_view list) {
  TrustedProxies out;
  size_t start = 0;
  while (start <= list.size()) {
    size_t comma = list.find(',', start);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view entry = trim(list.substr(start, comma - start));
    start = comma + 1;
    if (entry.empty()) return bad_entry(entry, "is empty: expected ADDR[,ADDR...]");
    size_t slash = entry.find('/');
    auto ip = IpAddress::parse(entry.substr(0, slash));
    if (!ip) return bad_entry(entry, "is not an IPv4 or IPv6 address (or ADDR/N)");
    Block block{*ip, 128};
    if (slash != std::string_view::npos) {
      std::string_view bits = entry.substr(slash + 1);
      int n = -1;
      auto [end, ec] = std::from_chars(bits.data(), bits.data() + bits.size(), n);
      int max = ip->is_v4() ? 32 : 128;
      if (ec != std::errc() || end != bits.data() + bits.size() || n < 0 || n > max) {
        return bad_entry(entry, "has a bad prefix length: expected /0../" + std::to_string(max));
      }
      block.prefix_bits = ip->is_v4() ? 96 + n : n;
      // The base with its host bits cleared must be the base itself.
      IpAddress masked = *ip;
      for (int bit = block.prefix_bits; bit < 128; ++bit) {
        masked.bytes[bit / 8] &= static_cast<uint8_t>(~(0x80 >> (bit % 8)));
      }
      if (masked.bytes != ip->bytes) {
        return bad_entry(entry, "has host bits set: the block is " + masked.to_string() + "/" +
                                    std::to_string(n));
      }
    }
    out.blocks_.push_back(block);
  }
  return out;
}

bool TrustedProxies::trusts(const IpAddress& address) const {
  for (const auto& b : blocks_) {
    if (in_block(address, b.base, b.prefix_bits)) return true;
  }
  return false;
}

bool TrustedProxies::trusts(std::string_view address) const {
  auto ip = IpAddress::parse(address);
  return ip && trusts(*ip);
}

Result<std::string> TrustedProxies::client_address(
    std::string_view peer, const std::vector<std::string>& forwarded_for) const {
  if (forwarded_for.empty() || !trusts(peer)) return std::string(peer);
  std::vector<std::string_view> elements;
  for (const auto& line : forwarded_for) {
    std::string_view rest = line;
    for (size_t comma = rest.find(','); comma != std::string_view::npos; comma = rest.find(',')) {
      elements.push_back(trim(rest.substr(0, comma)));
      rest.remove_prefix(comma + 1);
    }
    elements.push_back(trim(rest));
  }
  std::string from = "header 'X-Forwarded-For' from trusted proxy " + std::string(peer) + ": ";
  for (size_t i = elements.size(); i-- > 0;) {
    if (elements[i].empty()) return make_error("bad_request", from + "an empty element");
    auto hop = IpAddress::parse(elements[i]);
    if (!hop) {
      return make_error("bad_request", from + "'" + std::string(elements[i].substr(0, 64)) +
                                           "' is not an IP address");
    }
    if (!trusts(*hop) || i == 0) return hop->to_string();
  }
  return std::string(peer);  // not reached: a header line gives one element at least
}

std::string TrustedProxies::to_string() const {
  std::string out;
  for (const auto& b : blocks_) {
    if (!out.empty()) out += ",";
    out += b.base.to_string();
    if (b.prefix_bits != 128) {
      out += "/" + std::to_string(b.base.is_v4() ? b.prefix_bits - 96 : b.prefix_bits);
    }
  }
  return out;
}

}  // namespace vend::agent
