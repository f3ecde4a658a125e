// Private to the protocol codec: strict JSON parsing of untrusted payloads and
// a reader of typed, validated fields whose errors name the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "vend/result.hpp"

namespace vend::proto::internal {

using Json = nlohmann::json;
using Names = std::span<const std::string_view>;

// The deepest protocol message is an event with a snapshot: object > slots
// array > slot object > tokens array. 8 leaves room and bounds hostile input.
inline constexpr size_t kMaxJsonDepth = 8;

// Parses `payload` into `out`: nlohmann's iterative SAX parser feeding a DOM
// builder that stops at the first problem: a syntax error, nesting deeper than
// kMaxJsonDepth, a duplicate object key (parsers disagree on which copy wins)
// or a binary value. Returns "" on success, else why it failed. Malformed
// input never throws; only allocation failure can.
std::string parse_strict(std::string_view payload, Json& out);

// Text from the payload (keys, type names) as it may appear inside an error
// message: printable ASCII, at most 64 chars, so errors are safe to log and
// to embed in JSON.
std::string printable(std::string_view text);

// True for exactly 64 lowercase hex chars (MACs, SHA-256 digests).
bool is_hex64(std::string_view text);

// Reads the fields of one JSON object. The first problem is kept and later
// reads return defaults and do nothing, so a decoder reads every field
// straight through and checks failed() once. Strings are moved out of the
// object, which the reader therefore consumes. Not copyable.
//
// Errors (codes are the kErr* of protocol.hpp) name the field with its path:
// "missing field 'slots[2].digest' in snapshot".
class FieldReader {
 public:
  // REQUIRES: `object` is a JSON object and outlives the reader.
  // `type` names the message in errors; `prefix` is the path of a nested
  // object ("slots[2].").
  FieldReader(Json& object, std::string_view type, std::string prefix = {})
      : object_(object), type_(type), prefix_(std::move(prefix)) {}
  FieldReader(const FieldReader&) = delete;
  FieldReader& operator=(const FieldReader&) = delete;

  bool failed() const { return error_.has_value(); }
  // REQUIRES: failed().
  Error take_error() { return std::move(*error_); }
  std::string_view type_name() const { return type_; }

  // Any key outside `a` and `b` is an unknown_field.
  void only(Names a, Names b = {});
  bool has(std::string_view name) const { return object_.contains(name); }

  // Required string fields, each checked by a validator of protocol.hpp.
  std::string id(const char* name);           // is_valid_id
  std::string id_or_empty(const char* name);  // "" or is_valid_id
  std::string token(const char* name);        // is_valid_token
  std::string hex64(const char* name);        // is_hex64
  std::string text(const char* name);         // at most kMaxTextLength bytes

  // Required integer fields. Booleans and floats are wrong_type; values
  // outside the range (negative ones for uint64_in) are out_of_range.
  int integer(const char* name, int lo, int hi) { return static_cast<int>(int64_in(name, lo, hi)); }
  int64_t int64_in(const char* name, int64_t lo, int64_t hi);
  uint64_t uint64_in(const char* name, uint64_t lo);

  bool boolean(const char* name);
  // An array of at most kMaxTokensPerMessage distinct valid tokens.
  std::vector<std::string> token_list(const char* name);
  // The array `name`; nullptr after a problem.
  Json* array(const char* name);

  // Records a problem (unless one is already recorded).
  void fail(Error error);
  void out_of_range(std::string_view field, std::string_view rule);
  void wrong_type(std::string_view field, std::string_view expected);

 private:
  void fail(const char* code, std::string message) { fail(Error{code, std::move(message)}); }
  std::string describe(std::string_view field) const;
  Json* require(const char* name);
  std::string take_string(Json* value, std::string_view field, bool (*valid)(std::string_view),
                          std::string_view rule);
  std::string string_where(const char* name, bool (*valid)(std::string_view),
                           std::string_view rule) {
    return take_string(require(name), name, valid, rule);
  }

  Json& object_;
  std::string_view type_;
  std::string prefix_;
  std::optional<Error> error_;
};

}  // namespace vend::proto::internal
