// The metric families deployd exports (control/metrics_report.h), from what the store counts
// and what deployd says of itself.
#include "control/metrics_report.h"

#include <catch2/catch.hpp>

using namespace deployd;

namespace {

const MetricFamily& Named(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const MetricFamily& f : families)
    if (f.name == name) return f;
  FAIL("no family " << name);
  throw;
}

// "name{k=v,…} value" for each sample of the family.
std::vector<std::string> Lines(const MetricFamily& f) {
  std::vector<std::string> lines;
  for (const MetricSample& s : f.samples) {
    std::string line = s.name + "{";
    for (const auto& [k, v] : s.labels) line += k + "=" + v + ",";
    char value[32];
    std::snprintf(value, sizeof value, "%g", s.value);
    lines.push_back(line + "} " + value);
  }
  return lines;
}

StoreMetrics Counted() {
  StoreMetrics m;
  m.duration_bounds_ms = {10, 1000, 3600000};
  m.totals = {{"kimi", "failure.stall", 2, 900},
              {"kimi", "run.failed", 1, 900},
              {"kimi", "run.succeeded", 4, 1764519004200},
              {"kimi", "stall", 3, 900}};
  m.active = {{"glm", "running", 1}};
  m.durations = {{"kimi", "download", "succeeded", {0, 1, 4}, 5, 7200500}};
  m.benchmarks = {{"kimi", "bench", "kimi-4", 1764519004200,
                   R"({"benchmark":{"tokens_per_s":57.8,"ttft_p50_ms":182,"ttft_p95_ms":240,)"
                   R"("itl_p50_ms":17.1,"itl_p95_ms":null}})"},
                  {"kimi", "broken", "kimi-4", 1764519004200, R"({"benchmark":"no"})"}};
  return m;
}

}  // namespace

TEST_CASE("runs by plan and state: every plan with every state, 0 when none", "[metrics]") {
  std::vector<MetricFamily> f = MetricFamilies(Counted(), DaemonFigures{});
  CHECK(Named(f, "deployd_runs_finished_total").type == "counter");
  CHECK(Lines(Named(f, "deployd_runs_finished_total")) ==
        std::vector<std::string>{"deployd_runs_finished_total{plan=glm,state=succeeded,} 0",
                                 "deployd_runs_finished_total{plan=glm,state=failed,} 0",
                                 "deployd_runs_finished_total{plan=glm,state=cancelled,} 0",
                                 "deployd_runs_finished_total{plan=kimi,state=succeeded,} 4",
                                 "deployd_runs_finished_total{plan=kimi,state=failed,} 1",
                                 "deployd_runs_finished_total{plan=kimi,state=cancelled,} 0"});
  CHECK(Lines(Named(f, "deployd_active_runs")).size() == 8);
  CHECK(Lines(Named(f, "deployd_active_runs"))[1] ==
        "deployd_active_runs{plan=glm,state=running,} 1");
  CHECK(Lines(Named(f, "deployd_last_success_timestamp_seconds")) ==
        std::vector<std::string>{"deployd_last_success_timestamp_seconds{plan=kimi,} 1.76452e+09"});
  CHECK(Named(f, "deployd_last_success_timestamp_seconds").samples[0].value == 1764519004.2);
}

TEST_CASE("failures by class, stalls, and step durations as a histogram", "[metrics]") {
  std::vector<MetricFamily> f = MetricFamilies(Counted(), DaemonFigures{});
  std::vector<std::string> failures = Lines(Named(f, "deployd_failures_total"));
  REQUIRE(failures.size() == 16);  // 8 classes, 2 plans
  CHECK(failures[8] == "deployd_failures_total{plan=kimi,reason=exit,} 0");
  CHECK(failures[13] == "deployd_failures_total{plan=kimi,reason=stall,} 2");
  CHECK(Lines(Named(f, "deployd_stalls_total")) ==
        std::vector<std::string>{"deployd_stalls_total{plan=glm,} 0",
                                 "deployd_stalls_total{plan=kimi,} 3"});
  CHECK(Named(f, "deployd_step_duration_seconds").type == "histogram");
  CHECK(Lines(Named(f, "deployd_step_duration_seconds")) ==
        std::vector<std::string>{
            "deployd_step_duration_seconds_bucket{plan=kimi,step=download,state=succeeded,le=0.01,}"
            " 0",
            "deployd_step_duration_seconds_bucket{plan=kimi,step=download,state=succeeded,le=1,} 1",
            "deployd_step_duration_seconds_bucket{plan=kimi,step=download,state=succeeded,le=3600,}"
            " 4",
            "deployd_step_duration_seconds_bucket{plan=kimi,step=download,state=succeeded,le=+Inf,}"
            " 5",
            "deployd_step_duration_seconds_sum{plan=kimi,step=download,state=succeeded,} 7200.5",
            "deployd_step_duration_seconds_count{plan=kimi,step=download,state=succeeded,} 5"});
}

TEST_CASE("benchmark figures in seconds; a figure not measured is left out", "[metrics]") {
  std::vector<MetricFamily> f = MetricFamilies(Counted(), DaemonFigures{});
  CHECK(
      Lines(Named(f, "deployd_benchmark_tokens_per_second")) ==
      std::vector<std::string>{"deployd_benchmark_tokens_per_second{plan=kimi,step=bench,} 57.8"});
  CHECK(Named(f, "deployd_benchmark_ttft_p95_seconds").samples.at(0).value == 0.24);
  CHECK(Named(f, "deployd_benchmark_itl_p50_seconds").samples.at(0).value == Approx(0.0171));
  CHECK(Named(f, "deployd_benchmark_itl_p95_seconds").samples.empty());
  CHECK(Named(f, "deployd_benchmark_timestamp_seconds").samples.at(0).value == 1764519004.2);
}

TEST_CASE("the storage fault and deployd itself", "[metrics]") {
  DaemonFigures d;
  d.fault.Failed("cannot commit: database or disk is full", 10'000);
  d.fault.Failed("cannot commit: database or disk is full", 10'200);
  d.fault_totals = {3, 7, 4'000};
  d.waiting_transitions = 2;
  d.now_ms = 12'500;
  d.self.resident_bytes = 12 << 20;
  d.self.open_fds = 9;
  d.self.uptime_s = 60.5;
  std::vector<MetricFamily> f = MetricFamilies(StoreMetrics{}, d);
  CHECK(Named(f, "deployd_storage_fault_active").samples.at(0).value == 1);
  CHECK(Named(f, "deployd_storage_faults_total").samples.at(0).value == 3);
  CHECK(Named(f, "deployd_storage_failed_writes_total").samples.at(0).value == 7);
  CHECK(Named(f, "deployd_storage_fault_seconds_total").samples.at(0).value == 6.5);
  CHECK(Named(f, "deployd_storage_waiting_transitions").samples.at(0).value == 2);
  CHECK(Named(f, "deployd_resident_memory_bytes").samples.at(0).value == 12 << 20);
  CHECK(Named(f, "deployd_open_fds").samples.at(0).value == 9);
  CHECK(Named(f, "deployd_uptime_seconds").samples.at(0).value == 60.5);
  CHECK(Named(f, "deployd_max_fds").samples.empty());
  CHECK(Lines(Named(f, "deployd_build_info")) ==
        std::vector<std::string>{"deployd_build_info{version=" DEPLOYD_VERSION ",} 1"});
  // Nothing is counted for plans when the store has none.
  CHECK(Named(f, "deployd_runs_finished_total").samples.empty());
}

TEST_CASE("deployd's own process, read from /proc", "[metrics]") {
  SelfUsage self = ReadSelfUsage();
  REQUIRE(self.resident_bytes.has_value());
  CHECK(*self.resident_bytes > 0);
  REQUIRE(self.open_fds.has_value());
  CHECK(*self.open_fds >= 3);  // stdin, stdout, stderr at least
  REQUIRE(self.uptime_s.has_value());
  CHECK(*self.uptime_s >= 0);
  REQUIRE(self.start_time_s.has_value());
  CHECK(*self.start_time_s > 1.6e9);
}
