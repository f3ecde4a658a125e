// The one strict JSON reader of untrusted input: the MQTT protocol codec
// (protocol.hpp, ops.hpp) and the agent's HTTP API bodies both parse with
// parse_strict() and read fields with FieldReader.
//
// A problem is kept as a value (ParseProblem, FieldProblem) naming what and
// where; each contract words it: the protocol's error codes (kErr* of
// protocol.hpp, FieldReader's default wording), the HTTP API's bad_request
// messages (cloud-agent/http/http_json.hpp).
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

#include "vend/protocol.hpp"
#include "vend/result.hpp"

namespace vend::json {

using Json = nlohmann::json;
using Names = std::span<const std::string_view>;

// The deepest protocol message is an event with a snapshot: object > slots
// array > slot object > tokens array. 8 leaves room and bounds hostile
// input; HTTP bodies get the same bound.
inline constexpr size_t kMaxDepth = 8;

// Why parse_strict() refused a payload.
struct ParseProblem {
  enum class Kind {
    kSyntax,        // not JSON (nlohmann's parse error), invalid UTF-8 included
    kTooDeep,       // nesting deeper than kMaxDepth
    kDuplicateKey,  // an object repeats `key` (parsers disagree on which copy wins)
    kBinary,        // a binary value (not JSON)
  };
  Kind kind = Kind::kSyntax;
  size_t position = 0;        // kSyntax: the byte the parser stopped at
  std::string parser_detail;  // kSyntax: nlohmann's message without its "[json.exception...] "
  std::string key;            // kDuplicateKey: the key as sent
  // The problem in a short phrase safe to log ("invalid JSON at byte 12",
  // "nesting too deep", "duplicate key 'slot'" with printable()).
  std::string message;
};

// Parses `payload` into `out`: nlohmann's iterative SAX parser feeding a DOM
// builder that stops at the first problem. nullopt on success. Malformed
// input never throws; only allocation failure can.
std::optional<ParseProblem> parse_strict(std::string_view payload, Json& out);

// Text from the payload (keys, type names) as it may appear inside an error
// message: printable ASCII, at most 64 chars, so errors are safe to log and
// to embed in JSON.
std::string printable(std::string_view text);

// True for exactly 64 lowercase hex chars (MACs, SHA-256 digests).
bool is_hex64(std::string_view text);

// "an integer", "a float", "a string", "a boolean", "an array", "an
// object" or "null".
const char* type_name(const Json& value);

// One field that FieldReader refused.
struct FieldProblem {
  enum class Kind { kMissing, kUnknown, kWrongType, kOutOfRange };
  // The rule an out-of-range value broke.
  enum class Rule {
    kCustom,        // `text` states it ("must be greater than from_seq")
    kId,            // proto::is_valid_id
    kIdOrEmpty,     // "" or proto::is_valid_id
    kToken,         // proto::is_valid_token
    kHex64,         // is_hex64
    kRange,         // an integer in lo..hi
    kAtLeast,       // an integer of at least lo (unsigned)
    kMaxBytes,      // a string of at most hi bytes
    kControlChars,  // a string with a control character (refused)
    kSize,          // an array of lo..hi elements
  };
  Kind kind = Kind::kMissing;
  std::string path;  // the enclosing object's path with its dot: "" or "slots[2]."
  std::string name;  // the field under it, as sent (kUnknown: the key)
  // kWrongType: what the value must be ("a string", "an integer", "a
  // boolean", "an array", "an object") and what it is (type_name()).
  std::string expected;
  const char* actual = "";
  Rule rule = Rule::kCustom;  // kOutOfRange
  std::string text;           // kCustom: the rule as stated
  std::string lo, hi;         // kRange, kAtLeast, kMaxBytes, kSize: the bounds, in decimal
};

// Words a problem as one contract's Error; `type` is the reader's type name.
using Wording = Error (*)(const FieldProblem& problem, std::string_view type);
// The protocol's wording: codes kErrMissingField, kErrUnknownField,
// kErrWrongType, kErrOutOfRange of protocol.hpp; "missing field
// 'slots[2].digest' in snapshot".
Error protocol_wording(const FieldProblem& problem, std::string_view type);

// Reads the fields of one JSON object. The first problem is kept and later
// reads return defaults and do nothing, so a decoder reads every field
// straight through and checks failed() once. Strings are moved out of the
// object, which the reader therefore consumes (read each field once). Not
// copyable.
class FieldReader {
 public:
  // REQUIRES: `object` is a JSON object and outlives the reader. `type`
  // names the message in errors; `prefix` is the path of a nested object
  // ("slots[2]."); `wording` makes the Error of a problem.
  FieldReader(Json& object, std::string_view type, std::string prefix = {},
              Wording wording = protocol_wording)
      : object_(object), type_(type), prefix_(std::move(prefix)), wording_(wording) {}
  FieldReader(const FieldReader&) = delete;
  FieldReader& operator=(const FieldReader&) = delete;

  bool failed() const { return error_.has_value(); }
  // REQUIRES: failed().
  Error take_error() { return std::move(*error_); }
  std::string_view type_name() const { return type_; }
  // `prefix` + `field`: "slots[1].capacity".
  std::string path_of(std::string_view field) const { return prefix_ + std::string(field); }

  // Any key outside `a` and `b` is unknown.
  void only(Names a, Names b = {});
  bool has(std::string_view name) const { return object_.contains(name); }

  // Required string fields, each checked by a validator of protocol.hpp.
  std::string id(const char* name);           // is_valid_id
  std::string id_or_empty(const char* name);  // "" or is_valid_id
  std::string token(const char* name);        // is_valid_token
  std::string hex64(const char* name);        // is_hex64
  // At most `max_bytes` bytes; with `no_controls`, no byte below 0x20 nor
  // 0x7f either.
  std::string text(const char* name, size_t max_bytes = proto::kMaxTextLength,
                   bool no_controls = false);

  // Required integer fields. Booleans and floats are the wrong type; values
  // outside the range (negative ones for uint64_in) are out of range.
  int integer(const char* name, int lo, int hi) { return static_cast<int>(int64_in(name, lo, hi)); }
  int64_t int64_in(const char* name, int64_t lo, int64_t hi);
  uint64_t uint64_in(const char* name, uint64_t lo);

  bool boolean(const char* name);
  // An array of at most kMaxTokensPerMessage distinct valid tokens.
  std::vector<std::string> token_list(const char* name);
  // The array `name`; nullptr after a problem.
  Json* array(const char* name);
  // The array `name` of min_size..max_size elements; nullptr after a problem.
  Json* array(const char* name, size_t min_size, size_t max_size);

  // Records a problem (unless one is already recorded).
  void fail(Error error);
  void fail(const FieldProblem& problem);
  void out_of_range(std::string_view field, std::string_view rule);
  void wrong_type(std::string_view field, std::string_view expected);

 private:
  FieldProblem problem(FieldProblem::Kind kind, std::string_view field) const;
  void out_of_range(std::string_view field, FieldProblem::Rule rule, std::string lo = {},
                    std::string hi = {});
  void wrong_type(std::string_view field, std::string_view expected, const Json& value);
  Json* require(const char* name);
  std::string take_string(Json* value, std::string_view field, bool (*valid)(std::string_view),
                          FieldProblem::Rule rule);
  std::string string_where(const char* name, bool (*valid)(std::string_view),
                           FieldProblem::Rule rule) {
    return take_string(require(name), name, valid, rule);
  }

  Json& object_;
  std::string_view type_;
  std::string prefix_;
  Wording wording_;
  std::optional<Error> error_;
};

}  // namespace vend::json
