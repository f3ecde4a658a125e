// PrometheusText: HELP and TYPE once per family, labels and HELP escaped per
// the text exposition format 0.0.4, histograms as cumulative buckets, and the
// number formats Prometheus reads.
#include "vend/prometheus_text.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <cstdint>
#include <limits>
#include <string>

using vend::MetricType;
using vend::PrometheusText;

TEST_CASE("a scalar is its HELP, TYPE and one sample") {
  PrometheusText text;
  text.scalar("vend_up", MetricType::kGauge, "1 when up.", 1);
  text.scalar("vend_seen_total", MetricType::kCounter, "Seen.", uint64_t{18446744073709551615u});
  CHECK(text.take() ==
        "# HELP vend_up 1 when up.\n# TYPE vend_up gauge\nvend_up 1\n"
        "# HELP vend_seen_total Seen.\n# TYPE vend_seen_total counter\n"
        "vend_seen_total 18446744073709551615\n");
  CHECK(text.text().empty());
}

TEST_CASE("labelled samples share one HELP and TYPE; label values are escaped") {
  PrometheusText text;
  text.family("vend_orders", MetricType::kGauge, "Orders by state.");
  text.sample({{"state", "PAID"}}, int64_t{3});
  text.sample({{"device", "a\"b\\c\nd"}, {"slot", "2"}}, -1);
  CHECK(text.take() ==
        "# HELP vend_orders Orders by state.\n# TYPE vend_orders gauge\n"
        "vend_orders{state=\"PAID\"} 3\n"
        "vend_orders{device=\"a\\\"b\\\\c\\nd\",slot=\"2\"} -1\n");
}

TEST_CASE("HELP escapes backslash and newline, not quotes") {
  CHECK(vend::escape_help("a \\ \"b\"\nc") == "a \\\\ \"b\"\\nc");
  CHECK(vend::escape_label_value("plain") == "plain");
}

TEST_CASE("doubles: shortest round trip, infinities and NaN as Prometheus spells them") {
  CHECK(vend::format_double(0.025) == "0.025");
  CHECK(vend::format_double(1e-05) == "1e-05");
  CHECK(vend::format_double(60) == "60");
  CHECK(vend::format_double(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(vend::format_double(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(vend::format_double(std::numeric_limits<double>::quiet_NaN()) == "NaN");
  PrometheusText text;
  text.scalar("vend_last_seconds", MetricType::kGauge, "Last.", 0.5);
  CHECK(text.take() ==
        "# HELP vend_last_seconds Last.\n# TYPE vend_last_seconds gauge\n"
        "vend_last_seconds 0.5\n");
}

TEST_CASE("a histogram: cumulative buckets, +Inf, _sum and _count") {
  const std::array<double, 2> bounds = {0.1, 1};
  const std::array<uint64_t, 2> cumulative = {1, 3};
  PrometheusText text;
  text.family("vend_latency_seconds", MetricType::kHistogram, "Latency.");
  text.histogram(bounds, cumulative, 2.25, 4);
  CHECK(text.take() ==
        "# HELP vend_latency_seconds Latency.\n# TYPE vend_latency_seconds histogram\n"
        "vend_latency_seconds_bucket{le=\"0.1\"} 1\n"
        "vend_latency_seconds_bucket{le=\"1\"} 3\n"
        "vend_latency_seconds_bucket{le=\"+Inf\"} 4\n"
        "vend_latency_seconds_sum 2.25\n"
        "vend_latency_seconds_count 4\n");
}

TEST_CASE("a family started twice on one writer is a bug: the writer aborts") {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(STDERR_FILENO);  // the assertion's message is not this test's output
    PrometheusText text;
    text.scalar("vend_up", MetricType::kGauge, "Up.", 1);
    text.scalar("vend_up", MetricType::kGauge, "Up.", 1);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGABRT);
}

TEST_CASE("take() starts a new text: a family may be written again") {
  PrometheusText text;
  text.scalar("vend_up", MetricType::kGauge, "Up.", 1);
  std::string first = text.take();
  text.scalar("vend_up", MetricType::kGauge, "Up.", 1);
  CHECK(text.take() == first);
}
