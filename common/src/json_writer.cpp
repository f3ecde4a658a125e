#include "vend/json_writer.hpp"

#include <nlohmann/json.hpp>

namespace vend::json {

void append_string(std::string& out, std::string_view s) {
  bool plain = true;
  for (unsigned char c : s) plain = plain && c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  if (!plain) {
    out += nlohmann::json(std::string(s))
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    return;
  }
  out += '"';
  out.append(s);
  out += '"';
}

}  // namespace vend::json
