// Left-aligned text columns, two spaces apart, for vendctl's tables, and
// the formatting helpers of its views. The first row is the header. Cells are
// sanitized() and measured in UTF-8 code points. Private to vend_ctl.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace vend::ctl {

class TextTable {
 public:
  explicit TextTable(std::vector<std::string> header) { add(std::move(header)); }
  void add(std::vector<std::string> row);
  size_t rows() const { return rows_.size() - 1; }
  // Every row on its own line, trailing spaces trimmed.
  std::string render() const;

 private:
  std::vector<std::vector<std::string>> rows_;
};

// `text` safe to print on a terminal: C0 and C1 control characters (ESC,
// CSI, ...; newlines too unless keep_newlines) become '?', so a payload can
// never move the cursor or change the terminal's state.
std::string sanitized(std::string_view text, bool keep_newlines = false);

// 150 -> "1.50", -5 -> "-0.05".
std::string format_cents(int64_t cents);
// Milliseconds as a short age: "0s", "59s", "3m", "2h", "4d"; "never" for a
// zero timestamp is the caller's business.
std::string format_age(int64_t ms);
// Unix ms as UTC "HH:MM:SS" (with_date: "YYYY-MM-DD HH:MM:SS").
std::string format_utc(int64_t unix_ms, bool with_date = false);

}  // namespace vend::ctl
