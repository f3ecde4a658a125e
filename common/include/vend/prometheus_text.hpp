// The Prometheus text exposition format (version 0.0.4), written one metric
// family at a time: family() writes its HELP and TYPE lines, then sample()
// and histogram() write its samples. Every /metrics text the agent serves is
// written through this class, so escaping and number formats live here only.
//
//   PrometheusText text;
//   text.family("vend_orders", MetricType::kGauge, "Orders by state.");
//   text.sample({{"state", "PAID"}}, 3);
//   text.scalar("vend_up", MetricType::kGauge, "1 when up.", 1);
//   std::string body = text.take();
//
// HELP text is escaped (backslash, newline) and label values too (backslash,
// double quote, newline). Metric and label names are the caller's constants
// and are not checked. A family may be started once per writer: starting
// one again is a bug (assertion), as is a sample before any family.
// Not thread-safe; copyable.
#pragma once

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <set>
#include <span>
#include <string>
#include <string_view>

namespace vend {

enum class MetricType { kCounter, kGauge, kHistogram };

// One label of a sample: name="value".
struct MetricLabel {
  std::string_view name;
  std::string_view value;
};

class PrometheusText {
 public:
  // Starts family `name`: "# HELP name help" and "# TYPE name type".
  // REQUIRES: `name` not started before on this writer.
  PrometheusText& family(std::string_view name, MetricType type, std::string_view help);

  // One sample of the current family, "name{labels} value"; integers of any
  // width as decimal, doubles by format_double().
  // REQUIRES: a family started, not a histogram.
  template <std::integral T>
  PrometheusText& sample(T value) {
    return sample({}, value);
  }
  template <std::integral T>
  PrometheusText& sample(std::initializer_list<MetricLabel> labels, T value) {
    labelled(labels, std::to_string(value));
    return *this;
  }
  PrometheusText& sample(std::initializer_list<MetricLabel> labels, double value);

  // A family with one unlabelled sample.
  template <typename T>
  PrometheusText& scalar(std::string_view name, MetricType type, std::string_view help, T value) {
    return family(name, type, help).sample({}, value);
  }

  // The samples of the current histogram family: name_bucket{le="bound"}
  // per bound with its cumulative count, name_bucket{le="+Inf"} count,
  // name_sum, name_count. REQUIRES: a histogram family started;
  // `cumulative` as long as `bounds` (ascending, without +Inf).
  PrometheusText& histogram(std::span<const double> bounds, std::span<const uint64_t> cumulative,
                            double sum, uint64_t count);

  const std::string& text() const { return out_; }
  // The text written so far; the writer is empty afterwards.
  std::string take();

 private:
  // "family_suffix{labels} value\n"; `labels` already rendered, braces included.
  void line(std::string_view suffix, std::string_view labels, std::string_view value);
  void labelled(std::initializer_list<MetricLabel> labels, std::string_view value);

  std::string out_;
  std::string family_;  // the current family's name; empty before the first
  MetricType type_ = MetricType::kGauge;
  std::set<std::string, std::less<>> started_;  // every family started, for the once-rule
};

// Shortest round-trip text of a double as Prometheus reads it ("+Inf",
// "-Inf", "NaN", "0.25", "1e-05").
std::string format_double(double value);

// A label value escaped for the text format: \ as \\, " as \", newline as \n.
std::string escape_label_value(std::string_view value);

// HELP text escaped for the text format: \ as \\, newline as \n.
std::string escape_help(std::string_view help);

}  // namespace vend
