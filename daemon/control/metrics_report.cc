#include "control/metrics_report.h"

#include <boost/json.hpp>
#include <map>
#include <set>
#include <string>

#include "deployd/states.h"
#include "protocol/answer.h"
#include "protocol/benchmark_wire.h"
#include "util/clock.h"

namespace deployd {

namespace json = boost::json;

namespace {

constexpr RunState kEndStates[] = {RunState::kSucceeded, RunState::kFailed, RunState::kCancelled};
constexpr RunState kActiveStates[] = {RunState::kPending, RunState::kRunning, RunState::kPaused,
                                      RunState::kWaiting};

MetricFamily Family(std::string name, std::string type, std::string help) {
  return MetricFamily{std::move(name), std::move(type), std::move(help), {}};
}

double Seconds(std::int64_t ms) { return static_cast<double>(ms) / 1000; }

// The store's counts by plan and what they count.
class Totals {
 public:
  explicit Totals(const StoreMetrics& m) {
    for (const auto& t : m.totals) {
      by_key_[{t.plan, t.what}] = &t;
      plans_.insert(t.plan);
    }
    for (const auto& a : m.active) plans_.insert(a.plan);
  }
  // Every plan with a count or an unfinished run, in order.
  const std::set<std::string>& plans() const { return plans_; }
  const StoreMetrics::PlanTotal* Find(const std::string& plan, const std::string& what) const {
    auto it = by_key_.find({plan, what});
    return it == by_key_.end() ? nullptr : it->second;
  }
  double Count(const std::string& plan, const std::string& what) const {
    const StoreMetrics::PlanTotal* t = Find(plan, what);
    return t ? static_cast<double>(t->count) : 0;
  }

 private:
  std::map<std::pair<std::string, std::string>, const StoreMetrics::PlanTotal*> by_key_;
  std::set<std::string> plans_;
};

void AddRuns(const StoreMetrics& m, const Totals& totals, std::vector<MetricFamily>& out) {
  MetricFamily finished = Family(
      "deployd_runs_finished_total", "counter",
      "Runs that ended, by plan and the state they ended in (a retried run counts each end).");
  MetricFamily active =
      Family("deployd_active_runs", "gauge", "Runs that have not finished, by plan and state.");
  std::map<std::pair<std::string, std::string>, double> unfinished;
  for (const auto& a : m.active) unfinished[{a.plan, a.state}] = static_cast<double>(a.count);
  MetricFamily last = Family("deployd_last_success_timestamp_seconds", "gauge",
                             "When the plan's last run that succeeded ended (Unix time).");
  for (const std::string& plan : totals.plans()) {
    for (RunState state : kEndStates) {
      std::string name(ToString(state));
      finished.Add({{"plan", plan}, {"state", name}}, totals.Count(plan, "run." + name));
    }
    for (RunState state : kActiveStates) {
      std::string name(ToString(state));
      auto it = unfinished.find({plan, name});
      active.Add({{"plan", plan}, {"state", name}}, it == unfinished.end() ? 0 : it->second);
    }
    if (const StoreMetrics::PlanTotal* t = totals.Find(plan, "run.succeeded"))
      last.Add({{"plan", plan}}, Seconds(t->last_at_ms));
  }
  out.push_back(std::move(finished));
  out.push_back(std::move(active));
  out.push_back(std::move(last));
}

void AddFailures(const Totals& totals, std::vector<MetricFamily>& out) {
  MetricFamily failures = Family(
      "deployd_failures_total", "counter",
      "Steps that failed, and runs whose preflight failed, by plan and why: exit (the action's "
      "exit status), fail_on, interrupted, other, preflight, stall, timeout, verify.");
  MetricFamily stalls = Family("deployd_stalls_total", "counter",
                               "Attempts stopped for no progress (watch.progress), by plan, "
                               "whether the step was then retried or failed.");
  for (const std::string& plan : totals.plans()) {
    for (const char* reason : kFailureClasses)
      failures.Add({{"plan", plan}, {"reason", reason}},
                   totals.Count(plan, std::string("failure.") + reason));
    stalls.Add({{"plan", plan}}, totals.Count(plan, "stall"));
  }
  out.push_back(std::move(failures));
  out.push_back(std::move(stalls));
}

void AddStepDurations(const StoreMetrics& m, std::vector<MetricFamily>& out) {
  MetricFamily f = Family("deployd_step_duration_seconds", "histogram",
                          "How long steps took from their first fire until they succeeded or "
                          "failed (retries included), by plan, step and state.");
  std::vector<double> bounds;
  for (std::int64_t le_ms : m.duration_bounds_ms) bounds.push_back(Seconds(le_ms));
  for (const auto& s : m.durations) {
    std::vector<double> cumulative(s.cumulative.begin(), s.cumulative.end());
    f.AddHistogram({{"plan", s.plan}, {"step", s.step}, {"state", s.state}}, bounds, cumulative,
                   static_cast<double>(s.count), Seconds(s.sum_ms));
  }
  out.push_back(std::move(f));
}

void AddBenchmarks(const StoreMetrics& m, std::vector<MetricFamily>& out) {
  const char* kOf = ", in the newest succeeded run of the plan, by plan and step.";
  MetricFamily rate = Family("deployd_benchmark_tokens_per_second", "gauge",
                             std::string("Output tokens per second the benchmark check measured "
                                         "(all requests over its wall time)") +
                                 kOf);
  MetricFamily ttft50 =
      Family("deployd_benchmark_ttft_p50_seconds", "gauge",
             std::string("Median time to first token the benchmark measured") + kOf);
  MetricFamily ttft95 = Family("deployd_benchmark_ttft_p95_seconds", "gauge",
                               std::string("95th percentile of the time to first token") + kOf);
  MetricFamily itl50 =
      Family("deployd_benchmark_itl_p50_seconds", "gauge",
             std::string("Median inter-token latency the benchmark measured") + kOf);
  MetricFamily itl95 = Family("deployd_benchmark_itl_p95_seconds", "gauge",
                              std::string("95th percentile of the inter-token latency") + kOf);
  MetricFamily when = Family("deployd_benchmark_timestamp_seconds", "gauge",
                             "When the newest succeeded run of the plan, which measured these "
                             "figures, ended (Unix time), by plan and step.");
  for (const auto& b : m.benchmarks) {
    boost::system::error_code ec;
    json::value evidence = json::parse(b.evidence, ec);
    const json::value* figures =
        !ec && evidence.is_object() ? evidence.as_object().if_contains("benchmark") : nullptr;
    std::optional<BenchmarkFigures> f =
        figures && figures->is_object() ? DecodeFigures(figures->as_object()) : std::nullopt;
    if (!f) continue;
    MetricLabels labels{{"plan", b.plan}, {"step", b.step}};
    rate.Add(labels, f->tokens_per_s);
    const std::pair<MetricFamily*, std::optional<double>> latencies[] = {{&ttft50, f->ttft_p50_ms},
                                                                         {&ttft95, f->ttft_p95_ms},
                                                                         {&itl50, f->itl_p50_ms},
                                                                         {&itl95, f->itl_p95_ms}};
    for (const auto& [family, ms] : latencies)
      if (ms) family->Add(labels, *ms / 1000);
    when.Add(labels, Seconds(b.finished_at_ms));
  }
  for (MetricFamily* f : {&rate, &ttft50, &ttft95, &itl50, &itl95, &when})
    out.push_back(std::move(*f));
}

void AddStorage(const DaemonFigures& d, std::vector<MetricFamily>& out) {
  const bool active = d.fault.active();
  MetricFamily now =
      Family("deployd_storage_fault_active", "gauge",
             "1 while the state database refuses deployd's writes (a full disk, an I/O error, a "
             "read-only file system): transitions wait until they are recorded.");
  now.Add({}, active ? 1 : 0);
  MetricFamily faults = Family("deployd_storage_faults_total", "counter",
                               "Times the state database began to refuse writes, since deployd "
                               "started.");
  faults.Add({}, static_cast<double>(d.fault_totals.faults));
  MetricFamily writes = Family("deployd_storage_failed_writes_total", "counter",
                               "Writes the state database refused, since deployd started.");
  writes.Add({}, static_cast<double>(d.fault_totals.failed_writes));
  MetricFamily seconds = Family("deployd_storage_fault_seconds_total", "counter",
                                "Seconds the state database refused writes, since deployd "
                                "started.");
  std::int64_t ms = d.fault_totals.fault_ms + (active ? d.now_ms - d.fault.since_ms() : 0);
  seconds.Add({}, Seconds(std::max<std::int64_t>(0, ms)));
  MetricFamily waiting = Family("deployd_storage_waiting_transitions", "gauge",
                                "Transitions that wait to be recorded, in order, while the state "
                                "database refuses writes.");
  waiting.Add({}, static_cast<double>(d.waiting_transitions));
  for (MetricFamily* f : {&now, &faults, &writes, &seconds, &waiting}) out.push_back(std::move(*f));
}

void AddSelf(const SelfUsage& self, std::vector<MetricFamily>& out) {
  MetricFamily info =
      Family("deployd_build_info", "gauge", "deployd's version, as a label; always 1.");
  info.Add({{"version", DEPLOYD_VERSION}}, 1);
  out.push_back(std::move(info));
  auto add = [&out](const char* name, const char* help, const auto& value) {
    MetricFamily f = Family(name, "gauge", help);
    if (value) f.Add({}, static_cast<double>(*value));
    out.push_back(std::move(f));
  };
  add("deployd_resident_memory_bytes", "deployd's resident memory.", self.resident_bytes);
  add("deployd_open_fds", "File descriptors deployd has open.", self.open_fds);
  add("deployd_max_fds", "deployd's limit of open file descriptors (RLIMIT_NOFILE).", self.max_fds);
  add("deployd_start_time_seconds", "When deployd started (Unix time).", self.start_time_s);
  add("deployd_uptime_seconds", "Seconds since deployd started.", self.uptime_s);
}

}  // namespace

DaemonFigures FiguresOf(const RunManager& runs) {
  return DaemonFigures{runs.storage_fault(), runs.storage_fault_totals(),
                       runs.waiting_transitions(), ReadSelfUsage(), NowMs()};
}

std::vector<MetricFamily> MetricFamilies(const StoreMetrics& store, const DaemonFigures& daemon) {
  std::vector<MetricFamily> out;
  Totals totals(store);
  AddRuns(store, totals, out);
  AddFailures(totals, out);
  AddStepDurations(store, out);
  AddBenchmarks(store, out);
  AddStorage(daemon, out);
  AddSelf(daemon.self, out);
  return out;
}

Result<std::vector<MetricFamily>> CollectMetrics(RunStore& store, const RunManager& runs) {
  Result<StoreMetrics> counted = store.ReadMetrics();
  if (!counted.ok()) return counted.status();
  return MetricFamilies(counted.value(), FiguresOf(runs));
}

Result<std::string> RenderMetrics(RunStore& store, const RunManager& runs) {
  Result<std::vector<MetricFamily>> families = CollectMetrics(store, runs);
  if (!families.ok()) return families.status();
  return EncodeExposition(families.value());
}

json::object HandleMetrics(RequestContext& context) {
  Result<std::vector<MetricFamily>> families = CollectMetrics(context.store, context.runs);
  if (!families.ok()) return ErrorAnswer(families.status().message());
  json::object o = OkAnswer();
  o["metrics"] = EncodeMetricsJson(families.value());
  return o;
}

}  // namespace deployd
