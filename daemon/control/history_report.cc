#include "control/history_report.h"

#include <boost/json.hpp>

#include "deployd/states.h"
#include "protocol/answer.h"

namespace deployd {

namespace json = boost::json;

namespace {

json::object EvidenceOf(const StepRecord& step) {
  if (step.evidence.empty()) return {};
  boost::system::error_code ec;
  json::value v = json::parse(step.evidence, ec);
  return !ec && v.is_object() ? std::move(v.as_object()) : json::object{};
}

// The version the run's last step with one saw (the runtime a benchmark measured).
json::value VersionOf(const RunRecord& run) {
  json::value version = nullptr;
  for (const StepRecord& step : run.steps) {
    json::object evidence = EvidenceOf(step);
    if (const json::value* v = evidence.if_contains("version"); v && v->is_string()) version = *v;
  }
  return version;
}

}  // namespace

json::array RunBenchmarks(const RunRecord& run) {
  json::array benchmarks;
  for (const StepRecord& step : run.steps) {
    json::object evidence = EvidenceOf(step);
    const json::value* figures = evidence.if_contains("benchmark");
    if (!figures || !figures->is_object()) continue;
    json::object b{{"step", step.id}, {"state", ToString(step.state)}, {"benchmark", *figures}};
    if (const json::value* baseline = evidence.if_contains("baseline")) b["baseline"] = *baseline;
    benchmarks.push_back(std::move(b));
  }
  return benchmarks;
}

json::object HistoryReport(const std::string& plan, const std::vector<RunRecord>& runs) {
  json::array list;
  for (const RunRecord& run : runs) {
    list.push_back(json::object{{"run", run.id},
                                {"state", ToString(run.state)},
                                {"created_at_ms", run.created_at_ms},
                                {"finished_at_ms", run.finished_at_ms},
                                {"version", VersionOf(run)},
                                {"benchmarks", RunBenchmarks(run)}});
  }
  return json::object{{"plan", plan}, {"runs", std::move(list)}};
}

json::object HandleHistory(RequestContext& context, const json::object& request) {
  const json::value* plan = request.if_contains("plan");
  if (!plan || !plan->is_string()) return ErrorAnswer("bad request: history needs \"plan\"");
  std::int64_t limit = kMaxHistoryRuns;
  if (const json::value* l = request.if_contains("limit")) {
    if (!l->is_int64() || l->as_int64() < 0)
      return ErrorAnswer("bad request: \"limit\" must be a whole number from 0");
    if (l->as_int64() > 0 && l->as_int64() < kMaxHistoryRuns) limit = l->as_int64();
  }
  std::string name(plan->as_string());
  Result<std::vector<RunRecord>> runs = context.store.RunsOfPlan(name, static_cast<int>(limit));
  if (!runs.ok()) return ErrorAnswer(runs.status().message());
  json::object o = OkAnswer();
  o["history"] = HistoryReport(name, runs.value());
  return o;
}

}  // namespace deployd
