// Direct JSON writing for the hot messages and replies: the same bytes as
// nlohmann's dump() (sorted keys when the caller writes them sorted, no
// whitespace, invalid UTF-8 replaced) without building a tree. ops_test and
// http_json_test compare both encodings for awkward strings.
#pragma once

#include <charconv>
#include <string>
#include <string_view>
#include <vector>

namespace vend::json {

template <typename Int>
void append_number(std::string& out, Int n) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, end);
}

// A JSON string as dump() writes it: printable ASCII without '"' or '\\'
// is copied; anything else (escapes, UTF-8, invalid bytes) goes through
// nlohmann, so the bytes are the same in every case.
void append_string(std::string& out, std::string_view s);

// Writes one object's members in the order called (call them in sorted key
// order to match dump()); close() ends it.
class Object {
 public:
  explicit Object(std::string& out) : out_(out) { out_ += '{'; }
  // One append per member (they run for every field of every hot message).
  void key(std::string_view name) {
    char buf[64];
    if (name.size() > sizeof buf - 4) return key_slow(name);
    size_t n = 0;
    if (!first_) buf[n++] = ',';
    first_ = false;
    buf[n++] = '"';
    name.copy(buf + n, name.size());
    n += name.size();
    buf[n++] = '"';
    buf[n++] = ':';
    out_.append(buf, n);
  }
  void string(std::string_view name, std::string_view value) {
    key(name);
    append_string(out_, value);
  }
  template <typename Int>
  void number(std::string_view name, Int value) {
    key(name);
    append_number(out_, value);
  }
  void boolean(std::string_view name, bool value) {
    key(name);
    out_ += value ? "true" : "false";
  }
  void close() { out_ += '}'; }

 private:
  void key_slow(std::string_view name) {
    if (!first_) out_ += ',';
    first_ = false;
    out_ += '"';
    out_.append(name);
    out_ += "\":";
  }

  std::string& out_;
  bool first_ = true;
};

// A JSON array of objects, each written by `write(object, item)`.
template <typename T, typename Write>
void append_array(std::string& out, const std::vector<T>& items, Write write) {
  out += '[';
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    Object object(out);
    write(object, items[i]);
    object.close();
  }
  out += ']';
}

}  // namespace vend::json
