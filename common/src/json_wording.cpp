// The wording of json_reader.hpp's problems that is the reader's own:
// value types, and the protocol's error codes and messages.
#include "vend/json_reader.hpp"

namespace vend::json {

using proto::kErrMissingField;
using proto::kErrOutOfRange;
using proto::kErrUnknownField;
using proto::kErrWrongType;

const char* type_name(const Json& value) {
  if (value.is_number_float()) return "a float";
  if (value.is_number()) return "an integer";
  if (value.is_string()) return "a string";
  if (value.is_boolean()) return "a boolean";
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  return "null";
}

namespace {

using Kind = FieldProblem::Kind;
using Rule = FieldProblem::Rule;

std::string protocol_rule(const FieldProblem& p) {
  switch (p.rule) {
    case Rule::kId: return "must be 1..64 chars of [A-Za-z0-9._-]";
    case Rule::kIdOrEmpty: return "must be empty or 1..64 chars of [A-Za-z0-9._-]";
    case Rule::kToken: return "must be 32 lowercase hex chars";
    case Rule::kHex64: return "must be 64 lowercase hex chars";
    case Rule::kRange: return "must be in " + p.lo + ".." + p.hi;
    case Rule::kAtLeast: return "must be at least " + p.lo;
    case Rule::kMaxBytes: return "must be at most " + p.hi + " bytes";
    case Rule::kControlChars: return "must not contain control characters";
    case Rule::kSize: return "must have " + p.lo + ".." + p.hi + " entries";
    case Rule::kCustom: break;
  }
  return p.text;
}

}  // namespace

Error protocol_wording(const FieldProblem& p, std::string_view type) {
  auto describe = [&](std::string_view field) {
    return "field '" + p.path + std::string(field) + "' in " + std::string(type);
  };
  switch (p.kind) {
    case Kind::kMissing: return Error{kErrMissingField, "missing " + describe(p.name)};
    case Kind::kUnknown: return Error{kErrUnknownField, "unknown " + describe(printable(p.name))};
    case Kind::kWrongType: return Error{kErrWrongType, describe(p.name) + " must be " + p.expected};
    case Kind::kOutOfRange: break;
  }
  return Error{kErrOutOfRange, describe(p.name) + " " + protocol_rule(p)};
}

}  // namespace vend::json
