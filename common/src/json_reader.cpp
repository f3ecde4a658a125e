#include "vend/json_reader.hpp"

#include <algorithm>

namespace vend::json {

using proto::is_valid_id;
using proto::is_valid_token;
using proto::kMaxTokensPerMessage;

namespace {

// nlohmann messages start with "[json.exception.parse_error.101] ": the
// part after it says what went wrong.
std::string strip_exception_prefix(const std::string& what) {
  size_t end = what.find("] ");
  return (what.rfind("[json.exception.", 0) == 0 && end != std::string::npos) ? what.substr(end + 2)
                                                                              : what;
}

// SAX handler for Json::sax_parse building the DOM. Pointers to the open
// containers stay valid because a container is only appended to while it is
// on top of the stack. Not copyable.
class StrictDomBuilder {
 public:
  explicit StrictDomBuilder(Json& root) : root_(root) {}
  StrictDomBuilder(const StrictDomBuilder&) = delete;
  StrictDomBuilder& operator=(const StrictDomBuilder&) = delete;

  // Why parsing stopped; empty after a successful parse.
  const std::optional<ParseProblem>& problem() const { return problem_; }

  bool null() { return put(Json(nullptr)); }
  bool boolean(bool value) { return put(Json(value)); }
  bool number_integer(Json::number_integer_t value) { return put(Json(value)); }
  bool number_unsigned(Json::number_unsigned_t value) { return put(Json(value)); }
  bool number_float(Json::number_float_t value, const Json::string_t& /*text*/) {
    return put(Json(value));
  }
  bool string(Json::string_t& value) { return put(Json(std::move(value))); }
  bool binary(Json::binary_t& /*value*/) {
    return fail({ParseProblem::Kind::kBinary, 0, {}, {}, "binary values are not JSON"});
  }

  bool start_object(std::size_t /*elements*/) { return open(Json::value_t::object); }
  bool key(Json::string_t& name) {
    Json& object = *stack_.back();
    if (object.contains(name)) {
      std::string message = "duplicate key '" + printable(name) + "'";
      return fail({ParseProblem::Kind::kDuplicateKey, 0, {}, std::move(name), std::move(message)});
    }
    pending_ = &object[std::move(name)];
    return true;
  }
  bool end_object() { return close(); }
  bool start_array(std::size_t /*elements*/) { return open(Json::value_t::array); }
  bool end_array() { return close(); }

  bool parse_error(std::size_t position, const std::string& /*last_token*/,
                   const Json::exception& ex) {
    // nlohmann's message quotes raw input bytes: the short message names
    // the position only; the detail is for a contract that shows it.
    return fail({ParseProblem::Kind::kSyntax,
                 position,
                 strip_exception_prefix(ex.what()),
                 {},
                 "invalid JSON at byte " + std::to_string(position)});
  }

 private:
  // Places `value` where the parser is: the root, the end of the open array,
  // or the open object's pending key. Returns where it went.
  Json* place(Json&& value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(value));
      return &top.back();
    }
    *pending_ = std::move(value);
    return pending_;
  }
  bool put(Json&& value) {
    place(std::move(value));
    return true;
  }
  bool open(Json::value_t type) {
    if (stack_.size() >= kMaxDepth) {
      return fail({ParseProblem::Kind::kTooDeep, 0, {}, {}, "nesting too deep"});
    }
    stack_.push_back(place(Json(type)));
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
  bool fail(ParseProblem problem) {
    problem_ = std::move(problem);
    return false;
  }

  Json& root_;
  std::vector<Json*> stack_;
  Json* pending_ = nullptr;
  std::optional<ParseProblem> problem_;
};

bool is_id_or_empty(std::string_view s) { return s.empty() || is_valid_id(s); }

}  // namespace

std::optional<ParseProblem> parse_strict(std::string_view payload, Json& out) {
  StrictDomBuilder builder(out);
  if (Json::sax_parse(payload, &builder)) return std::nullopt;
  if (builder.problem()) return builder.problem();
  return ParseProblem{
      ParseProblem::Kind::kSyntax, payload.size(), "invalid JSON", {}, "invalid JSON"};
}

std::string printable(std::string_view text) {
  constexpr size_t kMaxShown = 64;
  std::string out;
  for (size_t i = 0; i < text.size() && i < kMaxShown; ++i) {
    const char c = text[i];
    out += (c >= 0x20 && c < 0x7f) ? c : '?';
  }
  if (text.size() > kMaxShown) out += "...";
  return out;
}

bool is_hex64(std::string_view text) {
  if (text.size() != 64) return false;
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

namespace {

using Kind = FieldProblem::Kind;
using Rule = FieldProblem::Rule;

}  // namespace

// ---- FieldReader ------------------------------------------------------------

void FieldReader::only(Names a, Names b) {
  auto listed = [](Names names, std::string_view key) {
    return std::find(names.begin(), names.end(), key) != names.end();
  };
  for (const auto& item : object_.items()) {
    if (failed()) return;
    if (!listed(a, item.key()) && !listed(b, item.key())) {
      fail(problem(Kind::kUnknown, item.key()));
    }
  }
}

std::string FieldReader::id(const char* name) { return string_where(name, is_valid_id, Rule::kId); }
std::string FieldReader::id_or_empty(const char* name) {
  return string_where(name, is_id_or_empty, Rule::kIdOrEmpty);
}
std::string FieldReader::token(const char* name) {
  return string_where(name, is_valid_token, Rule::kToken);
}
std::string FieldReader::hex64(const char* name) {
  return string_where(name, is_hex64, Rule::kHex64);
}

std::string FieldReader::text(const char* name, size_t max_bytes, bool no_controls) {
  Json* value = require(name);
  if (value == nullptr) return {};
  if (!value->is_string()) {
    wrong_type(name, "a string", *value);
    return {};
  }
  auto& text = value->get_ref<std::string&>();
  if (text.size() > max_bytes) {
    out_of_range(name, Rule::kMaxBytes, {}, std::to_string(max_bytes));
    return {};
  }
  if (no_controls && std::any_of(text.begin(), text.end(),
                                 [](unsigned char c) { return c < 0x20 || c == 0x7f; })) {
    out_of_range(name, Rule::kControlChars);
    return {};
  }
  return std::move(text);
}

int64_t FieldReader::int64_in(const char* name, int64_t lo, int64_t hi) {
  Json* value = require(name);
  if (value == nullptr) return 0;
  // nlohmann keeps booleans and floats apart from integers.
  if (!value->is_number_integer()) {
    wrong_type(name, "an integer", *value);
    return 0;
  }
  int64_t v = 0;
  bool in_range = false;
  if (value->is_number_unsigned()) {
    const uint64_t u = value->get<uint64_t>();
    in_range = hi >= 0 && u <= static_cast<uint64_t>(hi);
    v = static_cast<int64_t>(u);  // exact when in range
    in_range = in_range && v >= lo;
  } else {
    v = value->get<int64_t>();
    in_range = v >= lo && v <= hi;
  }
  if (!in_range) {
    out_of_range(name, Rule::kRange, std::to_string(lo), std::to_string(hi));
    return 0;
  }
  return v;
}

uint64_t FieldReader::uint64_in(const char* name, uint64_t lo) {
  Json* value = require(name);
  if (value == nullptr) return 0;
  if (!value->is_number_integer()) {
    wrong_type(name, "an integer", *value);
    return 0;
  }
  // A negative number is an integer, just outside the range.
  if (!value->is_number_unsigned() || value->get<uint64_t>() < lo) {
    out_of_range(name, Rule::kAtLeast, std::to_string(lo));
    return 0;
  }
  return value->get<uint64_t>();
}

bool FieldReader::boolean(const char* name) {
  Json* value = require(name);
  if (value == nullptr) return false;
  if (!value->is_boolean()) {
    wrong_type(name, "a boolean", *value);
    return false;
  }
  return value->get<bool>();
}

Json* FieldReader::array(const char* name) {
  Json* value = require(name);
  if (value == nullptr) return nullptr;
  if (!value->is_array()) {
    wrong_type(name, "an array", *value);
    return nullptr;
  }
  return value;
}

Json* FieldReader::array(const char* name, size_t min_size, size_t max_size) {
  Json* value = array(name);
  if (value == nullptr) return nullptr;
  if (value->size() < min_size || value->size() > max_size) {
    out_of_range(name, Rule::kSize, std::to_string(min_size), std::to_string(max_size));
    return nullptr;
  }
  return value;
}

std::vector<std::string> FieldReader::token_list(const char* name) {
  Json* list = array(name);
  if (list == nullptr) return {};
  if (list->size() > kMaxTokensPerMessage) {
    out_of_range(name, "must have at most " + std::to_string(kMaxTokensPerMessage) + " entries");
    return {};
  }
  std::vector<std::string> tokens;
  tokens.reserve(list->size());
  for (size_t i = 0; i < list->size() && !failed(); ++i) {
    const std::string path = std::string(name) + "[" + std::to_string(i) + "]";
    tokens.push_back(take_string(&(*list)[i], path, is_valid_token, Rule::kToken));
  }
  if (failed()) return {};
  // Token ids are unique: a repeated one would be counted twice in a pool.
  std::vector<std::string_view> sorted(tokens.begin(), tokens.end());
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    out_of_range(name, "must not repeat a token");
    return {};
  }
  return tokens;
}

void FieldReader::fail(Error error) {
  if (!error_) error_ = std::move(error);
}

void FieldReader::fail(const FieldProblem& problem) {
  if (!error_) error_ = wording_(problem, type_);
}

FieldProblem FieldReader::problem(Kind kind, std::string_view field) const {
  FieldProblem p;
  p.kind = kind;
  p.path = prefix_;
  p.name = std::string(field);
  return p;
}

void FieldReader::out_of_range(std::string_view field, std::string_view rule) {
  FieldProblem p = problem(Kind::kOutOfRange, field);
  p.text = std::string(rule);
  fail(p);
}

void FieldReader::out_of_range(std::string_view field, Rule rule, std::string lo, std::string hi) {
  FieldProblem p = problem(Kind::kOutOfRange, field);
  p.rule = rule;
  p.lo = std::move(lo);
  p.hi = std::move(hi);
  fail(p);
}

void FieldReader::wrong_type(std::string_view field, std::string_view expected) {
  FieldProblem p = problem(Kind::kWrongType, field);
  p.expected = std::string(expected);
  fail(p);
}

void FieldReader::wrong_type(std::string_view field, std::string_view expected, const Json& value) {
  FieldProblem p = problem(Kind::kWrongType, field);
  p.expected = std::string(expected);
  p.actual = json::type_name(value);
  fail(p);
}

Json* FieldReader::require(const char* name) {
  if (failed()) return nullptr;
  auto it = object_.find(name);
  if (it == object_.end()) {
    fail(problem(Kind::kMissing, name));
    return nullptr;
  }
  return &*it;
}

std::string FieldReader::take_string(Json* value, std::string_view field,
                                     bool (*valid)(std::string_view), Rule rule) {
  if (value == nullptr) return {};
  if (!value->is_string()) {
    wrong_type(field, "a string", *value);
    return {};
  }
  auto& text = value->get_ref<std::string&>();
  if (!valid(text)) {
    out_of_range(field, rule);
    return {};
  }
  return std::move(text);
}

}  // namespace vend::json
