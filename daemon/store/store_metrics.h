// StoreMetrics: what the state database counts for deployd's metrics (control/metrics_report.h),
// read by RunStore::ReadMetrics. The counts are kept by triggers in the transaction of each
// transition they count (schema.cc, version 6), so they survive restarts and the runs that
// retention forgets; a plan's counts go with its last run. A read is a few rows a plan, not a
// scan of every run or event. Plain values.
#ifndef DEPLOYD_STORE_STORE_METRICS_H_
#define DEPLOYD_STORE_STORE_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace deployd {

struct StoreMetrics {
  // A count of plan_totals: `what` is "run.STATE" (runs that ended in STATE), "failure.CLASS"
  // (steps that failed, and failed preflights, by class: verify, interrupted, stall, timeout,
  // fail_on, exit, other, preflight) or "stall" (attempts stopped for want of progress).
  struct PlanTotal {
    std::string plan;
    std::string what;
    std::int64_t count = 0;
    std::int64_t last_at_ms = 0;  // when the last one was counted
  };
  // The durations of one step of one plan that ended in `state` (succeeded or failed), from
  // its first fire: `cumulative[i]` of them took at most duration_bounds_ms[i].
  struct StepDurations {
    std::string plan;
    std::string step;
    std::string state;
    std::vector<std::int64_t> cumulative;
    std::int64_t count = 0;
    std::int64_t sum_ms = 0;
  };
  // Runs that have not finished, by plan and state.
  struct ActiveRuns {
    std::string plan;
    std::string state;
    std::int64_t count = 0;
  };
  // A step with benchmark figures in the newest succeeded run of its plan.
  struct Benchmark {
    std::string plan;
    std::string step;
    std::string run;
    std::int64_t finished_at_ms = 0;  // the run's
    std::string evidence;             // the step's evidence: JSON object text
  };

  std::vector<std::int64_t> duration_bounds_ms;  // ascending
  std::vector<PlanTotal> totals;                 // by plan, then what
  std::vector<StepDurations> durations;          // by plan, step, state
  std::vector<ActiveRuns> active;                // by plan, state
  std::vector<Benchmark> benchmarks;             // by plan, then the step's position
};

}  // namespace deployd

#endif  // DEPLOYD_STORE_STORE_METRICS_H_
