#include "protocol/metrics_exposition.h"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

using namespace deployd;

TEST_CASE("the text format: HELP and TYPE, then the samples, escaped", "[metrics]") {
  MetricFamily runs{
      "deployd_runs_finished_total", "counter", "Runs that ended.\nBy plan \\ state.", {}};
  runs.Add({{"plan", "demo"}, {"state", "succeeded"}}, 3);
  runs.Add({{"plan", "we\"ird\\pl\nan"}, {"state", "failed"}}, 0);
  MetricFamily up{"deployd_uptime_seconds", "gauge", "Seconds since deployd started.", {}};
  up.Add({}, 12.25);
  MetricFamily empty{"deployd_benchmark_tokens_per_second", "gauge", "Tokens/s.", {}};
  CHECK(EncodeExposition({runs, up, empty}) ==
        "# HELP deployd_runs_finished_total Runs that ended.\\nBy plan \\\\ state.\n"
        "# TYPE deployd_runs_finished_total counter\n"
        "deployd_runs_finished_total{plan=\"demo\",state=\"succeeded\"} 3\n"
        "deployd_runs_finished_total{plan=\"we\\\"ird\\\\pl\\nan\",state=\"failed\"} 0\n"
        "# HELP deployd_uptime_seconds Seconds since deployd started.\n"
        "# TYPE deployd_uptime_seconds gauge\n"
        "deployd_uptime_seconds 12.25\n"
        "# HELP deployd_benchmark_tokens_per_second Tokens/s.\n"
        "# TYPE deployd_benchmark_tokens_per_second gauge\n");
}

TEST_CASE("numbers are written in their shortest exact form", "[metrics]") {
  MetricFamily f{"x", "gauge", "x", {}};
  for (double v : {0.1, 57.8, 1764519004.2, 1e21, -2.5}) f.Add({}, v);
  f.Add({}, std::numeric_limits<double>::infinity());
  f.Add({}, std::nan(""));
  CHECK(EncodeExposition({f}) ==
        "# HELP x x\n# TYPE x gauge\nx 0.1\nx 57.8\nx 1764519004.2\nx 1e+21\nx -2.5\nx +Inf\n"
        "x NaN\n");
}

TEST_CASE("a histogram has cumulative buckets, +Inf, _sum and _count", "[metrics]") {
  MetricFamily f{"deployd_step_duration_seconds", "histogram", "Step durations.", {}};
  f.AddHistogram({{"plan", "p"}, {"step", "s"}}, {0.01, 1, 3600}, {1, 2, 2}, 3, 5000.5);
  CHECK(EncodeExposition({f}) ==
        "# HELP deployd_step_duration_seconds Step durations.\n"
        "# TYPE deployd_step_duration_seconds histogram\n"
        "deployd_step_duration_seconds_bucket{plan=\"p\",step=\"s\",le=\"0.01\"} 1\n"
        "deployd_step_duration_seconds_bucket{plan=\"p\",step=\"s\",le=\"1\"} 2\n"
        "deployd_step_duration_seconds_bucket{plan=\"p\",step=\"s\",le=\"3600\"} 2\n"
        "deployd_step_duration_seconds_bucket{plan=\"p\",step=\"s\",le=\"+Inf\"} 3\n"
        "deployd_step_duration_seconds_sum{plan=\"p\",step=\"s\"} 5000.5\n"
        "deployd_step_duration_seconds_count{plan=\"p\",step=\"s\"} 3\n");
}

TEST_CASE("the JSON of the metrics request reads back as the same text", "[metrics]") {
  MetricFamily f{"deployd_step_duration_seconds", "histogram", "Step durations.", {}};
  f.AddHistogram({{"plan", "p"}, {"step", "s\"1"}}, {0.01, 1}, {1, 2}, 3, 0.25);
  MetricFamily g{"deployd_open_fds", "gauge", "Open.", {}};
  g.Add({}, 17);
  boost::json::array json = EncodeMetricsJson({f, g});
  CHECK(boost::json::serialize(json[1]) ==
        R"({"name":"deployd_open_fds","type":"gauge","help":"Open.",)"
        R"("samples":[{"name":"deployd_open_fds","labels":{},"value":17}]})");
  std::optional<std::vector<MetricFamily>> back =
      DecodeMetricsJson(boost::json::parse(boost::json::serialize(json)).as_array());
  REQUIRE(back.has_value());
  CHECK(EncodeExposition(*back) == EncodeExposition({f, g}));
  CHECK_FALSE(DecodeMetricsJson(boost::json::parse(R"([{"name":"x"}])").as_array()));
  CHECK_FALSE(DecodeMetricsJson(
      boost::json::parse(R"([{"name":"x","type":"gauge","help":"","samples":[{"name":"x",)"
                         R"("labels":{"a":1},"value":1}]}])")
          .as_array()));
}
