// HistoryReport: a plan's runs with what their benchmarks measured, for `deployctl history`:
// newest first, each run's date, state and the version a version check saw in it, and each
// step's benchmark figures and the baseline they were compared with, as the steps' evidence
// recorded them (protocol/benchmark_wire.h).
//
//   {"v": 1, "op": "history", "plan": "kimi", "limit": 20}
//   → {"ok": true, "history": {"plan": "kimi", "runs": [{"run", "state", "created_at_ms",
//      "finished_at_ms", "version" (null when none), "benchmarks": [{"step", "state",
//      "benchmark": {…}, "baseline": {…}}]}, …]}}
#ifndef DEPLOYD_CONTROL_HISTORY_REPORT_H_
#define DEPLOYD_CONTROL_HISTORY_REPORT_H_

#include <boost/json/object.hpp>
#include <string>
#include <vector>

#include "control/request_handlers.h"
#include "store/run_store.h"

namespace deployd {

// Runs in one answer at most; `limit` 0 is this many.
inline constexpr int kMaxHistoryRuns = 1000;

boost::json::object HistoryReport(const std::string& plan, const std::vector<RunRecord>& runs);

// The benchmark figures a run's steps recorded: [{"step", "state", "benchmark", "baseline"}].
boost::json::array RunBenchmarks(const RunRecord& run);

// `history`: "plan" required, "limit" optional (a whole number; 0 or none: kMaxHistoryRuns).
boost::json::object HandleHistory(RequestContext& context, const boost::json::object& request);

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_HISTORY_REPORT_H_
