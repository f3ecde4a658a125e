#include "http/path_pattern.hpp"

#include <stdexcept>

namespace vend::agent::http {

namespace {

bool is_id_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

bool all_id_chars(std::string_view s) {
  for (char c : s) {
    if (!is_id_char(c)) return false;
  }
  return true;
}

// Calls `f(segment)` for each segment after the leading '/'; false: `f`
// refused one, or the path does not start with '/'.
template <typename F>
bool each_segment(std::string_view path, F f) {
  if (path.empty() || path[0] != '/') return false;
  size_t start = 1;
  while (true) {
    size_t end = path.find('/', start);
    if (!f(path.substr(start, end == std::string_view::npos ? end : end - start))) return false;
    if (end == std::string_view::npos) return true;
    start = end + 1;
  }
}

}  // namespace

PathPattern::PathPattern(std::string_view pattern) {
  bool ok = each_segment(pattern, [this](std::string_view s) {
    if (!segments_.empty() && segments_.back().kind == Kind::kFile) return false;
    if (s == "{id}") {
      segments_.push_back({Kind::kId, {}});
    } else if (s == "{n}") {
      segments_.push_back({Kind::kNumber, {}});
    } else if (s == "{file}") {
      segments_.push_back({Kind::kFile, {}});
    } else {
      if (s.find_first_of("{}") != std::string_view::npos) return false;
      segments_.push_back({Kind::kLiteral, std::string(s)});
    }
    return true;
  });
  if (!ok) throw std::invalid_argument("bad path pattern '" + std::string(pattern) + "'");
}

bool PathPattern::matches(std::string_view path) const {
  size_t i = 0;
  bool ok = each_segment(path, [this, &i](std::string_view s) {
    if (i == segments_.size()) return false;
    const Segment& want = segments_[i++];
    switch (want.kind) {
      case Kind::kLiteral: return s == want.text;
      case Kind::kId: return !s.empty() && all_id_chars(s);
      case Kind::kNumber:
        return !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == s.npos;
      case Kind::kFile: return all_id_chars(s);
    }
    return false;
  });
  return ok && i == segments_.size();
}

std::string_view path_segment(std::string_view path, size_t i) {
  std::string_view out;
  size_t at = 0;
  each_segment(path, [&](std::string_view s) {
    if (at++ != i) return true;
    out = s;
    return false;
  });
  return out;
}

}  // namespace vend::agent::http
