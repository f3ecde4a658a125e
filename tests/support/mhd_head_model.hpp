// A model of how libmicrohttpd 0.9.75 parses a request's head in place
// (src/microhttpd/connection.c: get_next_header_line,
// parse_initial_message_line, process_header_line, process_broken_line), for
// the tests of check_head_layout() and for fuzz_framing: it overwrites the
// same bytes with NULs and reports each piece where MHD reports it, so a
// HeadLayout is built from raw bytes without a server. Header-only: the fuzz
// preset compiles it without the test support library.
//
// Modelled: a line ends at CRLF or at a bare LF (both become NULs); the
// request line is split at its first space (spaces after it skipped) and at
// the last space (the version must be HTTP/1.x, 8 bytes); a header line is
// split at the first ':' of its C string (whitespace after it skipped); a line
// whose first byte is NUL ends the head like an empty one; a line starting
// with SP or HTAB continues the field before it, which MHD then copies out of
// the head (its name is reported elsewhere). Not modelled: empty lines before
// the request line, methods MHD refuses, the memory limits.
#pragma once

#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/request_framing.hpp"

namespace vend::test {

class MhdHeadModel {
 public:
  // The head of `raw` as MHD leaves it, or nothing when MHD refuses it itself
  // (no space or no HTTP/1.x version in the request line, a header line
  // without a colon) or the head has not ended.
  static std::optional<MhdHeadModel> parse(std::string_view raw) {
    MhdHeadModel m;
    m.buffer_.assign(raw);
    size_t pos = 0;
    size_t start = 0, len = 0;
    if (!m.next_line(pos, start, len) || !m.request_line(start, len)) return std::nullopt;
    while (true) {
      if (!m.next_line(pos, start, len)) return std::nullopt;
      char first = m.buffer_[start];
      if (first == '\0') break;  // the empty line (or one starting with NUL)
      if ((first == ' ' || first == '\t') && !m.fields_.empty()) {
        m.fields_.back().moved = true;  // obs-fold: MHD reallocates the field
        continue;
      }
      const char* line = m.buffer_.c_str() + start;
      const char* colon = std::strchr(line, ':');
      if (colon == nullptr) return std::nullopt;  // MHD's own 400
      size_t at = start + static_cast<size_t>(colon - line);
      m.buffer_[at] = '\0';
      size_t value = at + 1;
      while (m.buffer_[value] == ' ' || m.buffer_[value] == '\t') ++value;
      m.fields_.push_back({std::string(line), start, value, value + m.c_len(value), false});
    }
    m.head_size_ = pos;
    return m;
  }

  // The layout check_head_layout() reads; views into this object.
  agent::HeadLayout layout() const {
    agent::HeadLayout l;
    l.buffer = std::string_view(buffer_).substr(0, head_size_);
    l.method_end = method_end_;
    l.target_at = target_at_;
    l.target_end = target_end_;
    l.version_at = version_at_;
    l.version_end = version_at_ + 8;
    for (const Field& f : fields_) {
      // A moved field lies past the head, as a pool block after it would.
      size_t moved = f.moved ? head_size_ + 1024 : 0;
      l.fields.push_back({f.name, f.name_at + moved, f.value_at + moved, f.value_end + moved});
    }
    return l;
  }

  // The head as the access handler reads it (check_request_head()): the
  // target, the version and every field's C strings; views into this object.
  agent::RequestHead head() const {
    agent::RequestHead h;
    h.version = std::string_view(buffer_).substr(version_at_, 8);
    h.target = std::string_view(buffer_).substr(target_at_, target_end_ - target_at_);
    for (const Field& f : fields_) {
      h.fields.push_back(
          {f.name, std::string_view(buffer_).substr(f.value_at, f.value_end - f.value_at)});
    }
    return h;
  }

  size_t head_size() const { return head_size_; }

 private:
  struct Field {
    std::string name;
    size_t name_at, value_at, value_end;
    bool moved;
  };

  size_t c_len(size_t at) const { return std::strlen(buffer_.c_str() + at); }

  // The next line from `pos`: its start and length, its end overwritten.
  bool next_line(size_t& pos, size_t& start, size_t& len) {
    for (size_t i = pos; i < buffer_.size(); ++i) {
      bool crlf = buffer_[i] == '\r' && i + 1 < buffer_.size() && buffer_[i + 1] == '\n';
      if (!crlf && buffer_[i] != '\n') continue;
      start = pos;
      len = i - pos;
      buffer_[i] = '\0';
      if (crlf) buffer_[i + 1] = '\0';
      pos = i + (crlf ? 2 : 1);
      return true;
    }
    return false;
  }

  bool request_line(size_t start, size_t len) {
    if (start != 0) return false;
    size_t space = buffer_.find(' ');
    if (space == std::string::npos || space >= len || space == 0) return false;
    buffer_[space] = '\0';
    method_end_ = c_len(0);
    size_t uri = space + 1;
    while (uri < len && buffer_[uri] == ' ') ++uri;
    if (uri == len) return false;  // no version: MHD's 400
    size_t v = len - 1;
    while (v > uri && buffer_[v] == ' ') --v;
    while (v > uri && buffer_[v] != ' ') --v;
    if (v <= uri) return false;
    buffer_[v] = '\0';
    version_at_ = v + 1;
    std::string_view version(buffer_.data() + version_at_, len - version_at_);
    if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || version[7] < '0' ||
        version[7] > '9') {
      return false;  // MHD's 400 or 505
    }
    target_at_ = uri;
    target_end_ = uri + c_len(uri);
    return true;
  }

  std::string buffer_;
  size_t method_end_ = 0, target_at_ = 0, target_end_ = 0, version_at_ = 0, head_size_ = 0;
  std::vector<Field> fields_;
};

}  // namespace vend::test
