#include "text_table.hpp"

#include <algorithm>
#include <ctime>

namespace vend::ctl {

namespace {

// Code points of UTF-8 text (continuation bytes are not counted).
size_t display_width(std::string_view text) {
  return static_cast<size_t>(
      std::count_if(text.begin(), text.end(), [](char c) { return (c & 0xC0) != 0x80; }));
}

}  // namespace

void TextTable::add(std::vector<std::string> row) {
  for (std::string& cell : row) cell = sanitized(cell);
  rows_.push_back(std::move(row));
}

std::string TextTable::render() const {
  std::vector<size_t> widths;
  for (const auto& row : rows_) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      widths[i] = std::max(widths[i], display_width(row[i]));
    }
  }
  std::string out;
  for (const auto& row : rows_) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - display_width(row[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string sanitized(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const bool c0 = (c < 0x20 && !(keep_newlines && c == '\n')) || c == 0x7f;
    // U+0080..U+009F in UTF-8: 0xC2 0x80..0x9F (CSI is U+009B).
    const bool c1 = c == 0xC2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9F;
    if (c1) ++i;
    out += (c0 || c1) ? '?' : static_cast<char>(c);
  }
  return out;
}

std::string format_cents(int64_t cents) {
  const bool negative = cents < 0;
  const uint64_t abs = negative ? 0 - static_cast<uint64_t>(cents) : static_cast<uint64_t>(cents);
  std::string fraction = std::to_string(abs % 100);
  if (fraction.size() < 2) fraction = "0" + fraction;
  return (negative ? "-" : "") + std::to_string(abs / 100) + "." + fraction;
}

std::string format_age(int64_t ms) {
  const int64_t s = std::max<int64_t>(ms, 0) / 1000;
  if (s < 60) return std::to_string(s) + "s";
  if (s < 3600) return std::to_string(s / 60) + "m";
  if (s < 86400) return std::to_string(s / 3600) + "h";
  return std::to_string(s / 86400) + "d";
}

std::string format_utc(int64_t unix_ms, bool with_date) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, with_date ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &tm);
  return buf;
}

}  // namespace vend::ctl
