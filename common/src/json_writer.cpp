#include "vend/json_writer.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

namespace vend::json {

void append_string(std::string& out, std::string_view s) {
  // Checked and copied in one pass into a buffer, then one append (this
  // runs for every string of every hot message and reply).
  char buf[128];
  if (s.size() <= sizeof buf - 2) {
    char* p = buf;
    *p++ = '"';
    bool ok = true;
    p = raw::put_plain(p, s, ok);
    if (ok) {
      *p++ = '"';
      out.append(buf, static_cast<size_t>(p - buf));
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
