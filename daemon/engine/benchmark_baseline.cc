#include "engine/benchmark_baseline.h"

#include <algorithm>
#include <boost/json.hpp>

namespace deployd {

bool HasBenchmark(const std::vector<Check>& checks) {
  return std::any_of(checks.begin(), checks.end(),
                     [](const Check& c) { return c.kind == CheckKind::kBenchmark; });
}

BenchmarkBaseline FindBaseline(RunStore& store, const std::string& plan, const std::string& step) {
  BenchmarkBaseline baseline;
  baseline.plan = plan;
  baseline.step = step;
  Result<std::optional<RunStore::StepEvidence>> found =
      store.LastSucceededEvidence(plan, step, "benchmark");
  if (!found.ok()) {
    baseline.problem = found.status().message();
    return baseline;
  }
  if (!*found) return baseline;
  boost::system::error_code ec;
  boost::json::value evidence = boost::json::parse((*found)->evidence, ec);
  const boost::json::value* figures =
      !ec && evidence.is_object() ? evidence.as_object().if_contains("benchmark") : nullptr;
  if (figures && figures->is_object()) baseline.figures = DecodeFigures(figures->as_object());
  if (!baseline.figures) {
    baseline.problem = "run " + (*found)->run_id + " recorded figures that cannot be read";
    return baseline;
  }
  baseline.run = (*found)->run_id;
  return baseline;
}

}  // namespace deployd
