// The baseline a step's `benchmark` is compared with: the figures the same step recorded in the
// newest run of the same plan that succeeded on this host (this daemon's store), read when the
// step's verify checks start. The first run finds none, and its figures become the baseline.
// On the daemon's thread: it reads the store.
#ifndef DEPLOYD_ENGINE_BENCHMARK_BASELINE_H_
#define DEPLOYD_ENGINE_BENCHMARK_BASELINE_H_

#include <string>
#include <vector>

#include "checks/benchmark_verdict.h"
#include "deployd/plan.h"
#include "store/run_store.h"

namespace deployd {

bool HasBenchmark(const std::vector<Check>& checks);

BenchmarkBaseline FindBaseline(RunStore& store, const std::string& plan, const std::string& step);

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_BENCHMARK_BASELINE_H_
