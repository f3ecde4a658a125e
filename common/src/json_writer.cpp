#include "vend/json_writer.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace vend::json {

void append_string(std::string& out, std::string_view s) {
  // Checked and copied in one pass into a buffer, then one append (this
  // runs for every string of every hot message and reply).
  char buf[128];
  if (s.size() <= sizeof buf - 2) {
    size_t n = 0;
    buf[n++] = '"';
    unsigned char ok = 1;
    for (unsigned char c : s) {
      ok &= kPlain[c];  // no branch per byte
      buf[n++] = static_cast<char>(c);
    }
    if (ok != 0) {
      buf[n++] = '"';
      out.append(buf, n);
      return;
    }
  } else if (std::all_of(s.begin(), s.end(), [](unsigned char c) { return plain(c); })) {
    out += '"';
    out.append(s);
    out += '"';
    return;
  }
  out +=
      nlohmann::json(std::string(s)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace vend::json
