// The path patterns of the HTTP API's routes, matched segment by segment
// (std::regex cost a request about 15,000 instructions: docs/benchmarks.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace vend::agent::http {

// "/v1/orders/{id}/payment": literal segments, and
// - {id}: one or more of [A-Za-z0-9._-] (the alphabet of ids),
// - {n}: 1..9 digits,
// - {file}: zero or more of the id alphabet, only as the last segment.
// A path matches when it has exactly the pattern's segments: "/v1/orders/"
// (an empty id) and "/v1/orders/x/" (a trailing slash) match nothing.
class PathPattern {
 public:
  explicit PathPattern(std::string_view pattern);
  bool matches(std::string_view path) const;

 private:
  enum class Kind { kLiteral, kId, kNumber, kFile };
  struct Segment {
    Kind kind;
    std::string text;  // kLiteral
  };
  std::vector<Segment> segments_;
};

// Segment `i` of a path, counted from 0 after its leading '/'; "" past the
// end: path_segment("/v1/orders/x", 2) == "x".
std::string_view path_segment(std::string_view path, size_t i);

}  // namespace vend::agent::http
