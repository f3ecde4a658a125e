#include "vend/prometheus_text.hpp"

#include <charconv>
#include <cmath>
#include <system_error>

#include "vend/assert.hpp"

namespace vend {

namespace {

const char* type_name(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

// `text` with each character of `specials` escaped as \<c> (newline as \n).
std::string escape(std::string_view text, std::string_view specials) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (specials.find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}

std::string render_labels(std::initializer_list<MetricLabel> labels) {
  if (labels.size() == 0) return "";
  std::string out = "{";
  for (const MetricLabel& label : labels) {
    if (out.size() > 1) out += ',';
    out += label.name;
    out += "=\"";
    out += escape_label_value(label.value);
    out += '"';
  }
  out += '}';
  return out;
}

}  // namespace

PrometheusText& PrometheusText::family(std::string_view name, MetricType type,
                                       std::string_view help) {
  VEND_ASSERT(!name.empty());
  VEND_ASSERT(started_.emplace(name).second);  // HELP and TYPE once per family
  family_ = name;
  type_ = type;
  out_ += "# HELP ";
  out_ += name;
  out_ += ' ';
  out_ += escape_help(help);
  out_ += "\n# TYPE ";
  out_ += name;
  out_ += ' ';
  out_ += type_name(type);
  out_ += '\n';
  return *this;
}

PrometheusText& PrometheusText::sample(std::initializer_list<MetricLabel> labels, double value) {
  labelled(labels, format_double(value));
  return *this;
}

PrometheusText& PrometheusText::histogram(std::span<const double> bounds,
                                          std::span<const uint64_t> cumulative, double sum,
                                          uint64_t count) {
  VEND_ASSERT(!family_.empty() && type_ == MetricType::kHistogram);
  VEND_ASSERT(bounds.size() == cumulative.size());
  for (size_t i = 0; i < bounds.size(); ++i) {
    line("_bucket", "{le=\"" + format_double(bounds[i]) + "\"}", std::to_string(cumulative[i]));
  }
  line("_bucket", "{le=\"+Inf\"}", std::to_string(count));
  line("_sum", "", format_double(sum));
  line("_count", "", std::to_string(count));
  return *this;
}

std::string PrometheusText::take() {
  std::string out = std::move(out_);
  out_.clear();
  family_.clear();
  started_.clear();
  return out;
}

void PrometheusText::labelled(std::initializer_list<MetricLabel> labels, std::string_view value) {
  VEND_ASSERT(!family_.empty() && type_ != MetricType::kHistogram);
  line("", render_labels(labels), value);
}

void PrometheusText::line(std::string_view suffix, std::string_view labels,
                          std::string_view value) {
  out_ += family_;
  out_ += suffix;
  out_ += labels;
  out_ += ' ';
  out_ += value;
  out_ += '\n';
}

std::string format_double(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);
  return ec == std::errc() ? std::string(buf, end) : std::string("NaN");
}

std::string escape_label_value(std::string_view value) { return escape(value, "\\\""); }

std::string escape_help(std::string_view help) { return escape(help, "\\"); }

}  // namespace vend
