#include "http/http_request.hpp"

#include <algorithm>
#include <iterator>

namespace vend::agent {

namespace {

unsigned char lower(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; }

}  // namespace

bool CaseInsensitiveLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(
      a.begin(), a.end(), b.begin(), b.end(),
      [](unsigned char x, unsigned char y) { return lower(x) < lower(y); });
}

std::string HttpRequest::header(std::string_view name, size_t i) const {
  auto [first, last] = headers.equal_range(name);
  if (static_cast<size_t>(std::distance(first, last)) <= i) return std::string();
  return std::next(first, static_cast<std::ptrdiff_t>(i))->second;
}

}  // namespace vend::agent
