// Direct JSON writing for the hot messages and replies: the same bytes as
// nlohmann's dump() (sorted keys when the caller writes them sorted, no
// whitespace, invalid UTF-8 replaced) without building a tree. ops_test and
// http_api_test compare both encodings for awkward strings.
#pragma once

#include <array>
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

// A byte dump() copies into a string as it is: printable ASCII but '"' and
// '\\'.
constexpr bool plain(unsigned char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; }
// plain() of every byte, for the copy loops (one load per byte).
inline constexpr auto kPlain = [] {
  std::array<unsigned char, 256> t{};
  for (int c = 0; c < 256; ++c) t[c] = plain(static_cast<unsigned char>(c)) ? 1 : 0;
  return t;
}();

// Writing through a raw pointer into room the caller reserved: Object's
// members (built in a buffer, then one append) and the hottest message, the
// ops order event (one per order transition, its keys literals). Each
// returns the position after what it wrote.
namespace raw {
template <size_t N>
inline char* put(char* p, const char (&literal)[N]) {
  std::char_traits<char>::copy(p, literal, N - 1);
  return p + N - 1;
}
// `s` copied, and `ok` cleared when a byte of it needs escaping (the caller
// then writes the message the general way: same bytes as dump()).
inline char* put_plain(char* p, std::string_view s, bool& ok) {
  unsigned char all = 1;
  for (unsigned char c : s) {
    all &= kPlain[c];  // no branch per byte
    *p++ = static_cast<char>(c);
  }
  ok &= all != 0;
  return p;
}
template <typename Int>
inline char* put_number(char* p, Int n) {
  return std::to_chars(p, p + 24, n).ptr;  // the caller reserved 24 per number
}
}  // namespace raw

// Writes one object's members in the order called (call them in sorted key
// order to match dump()); close() ends it.
class Object {
 public:
  explicit Object(std::string& out) : out_(out) { out_ += '{'; }
  // Each member is written with one append: key and value together (they
  // run for every field of every hot message and reply).
  void key(std::string_view name) {
    char buf[kMaxName + 4];
    if (name.size() > kMaxName) return key_slow(name);
    char* p = put_key(buf, name);
    out_.append(buf, static_cast<size_t>(p - buf));
  }
  void string(std::string_view name, std::string_view value) {
    char buf[kMaxName + 4 + kMaxValue + 2];
    if (name.size() > kMaxName || value.size() > kMaxValue) {
      key(name);
      return append_string(out_, value);
    }
    const bool was_first = first_;
    char* p = put_key(buf, name);
    *p++ = '"';
    bool ok = true;
    p = raw::put_plain(p, value, ok);
    if (!ok) {  // to escape: the general way, same bytes as dump()
      first_ = was_first;
      key(name);
      return append_string(out_, value);
    }
    *p++ = '"';
    out_.append(buf, static_cast<size_t>(p - buf));
  }
  template <typename Int>
  void number(std::string_view name, Int value) {
    char buf[kMaxName + 4 + 24];
    if (name.size() > kMaxName) {
      key_slow(name);
      return append_number(out_, value);
    }
    char* p = raw::put_number(put_key(buf, name), value);
    out_.append(buf, static_cast<size_t>(p - buf));
  }
  void boolean(std::string_view name, bool value) {
    key(name);
    out_ += value ? "true" : "false";
  }
  void close() { out_ += '}'; }

 private:
  static constexpr size_t kMaxName = 60;    // longer names: key_slow
  static constexpr size_t kMaxValue = 120;  // longer strings: append_string

  // `,"name":` (the comma after the first member) at `p`.
  char* put_key(char* p, std::string_view name) {
    if (!first_) *p++ = ',';
    first_ = false;
    *p++ = '"';
    p += name.copy(p, name.size());
    *p++ = '"';
    *p++ = ':';
    return p;
  }
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
