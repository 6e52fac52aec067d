// MetricsReport: what deployd exports about itself, as metric families
// (protocol/metrics_exposition.h), from the store's counts (store/store_metrics.h), the run
// manager's storage fault, and deployd's own process (self_usage.h). The same families serve
// the `metrics` request (`deployctl metrics`), the node_exporter textfile
// (metrics_textfile.h) and `/metrics` over HTTP (metrics_http.h). Names, types, units and
// labels follow Prometheus's conventions (README, "Metrics"); the labels are plans, steps and
// fixed words, never run ids, so a scrape's size is bounded by the plans recorded.
//
//   {"v": 1, "op": "metrics"}   → {"ok": true, "metrics": [{"name", "type", "help", "samples"}]}
//
// One thread: the daemon's io_context, where the RunManager and the RunStore live.
#ifndef DEPLOYD_CONTROL_METRICS_REPORT_H_
#define DEPLOYD_CONTROL_METRICS_REPORT_H_

#include <boost/json/object.hpp>
#include <vector>

#include "control/request_handlers.h"
#include "control/self_usage.h"
#include "deployd/status.h"
#include "engine/run_manager.h"
#include "engine/storage_fault.h"
#include "protocol/metrics_exposition.h"
#include "store/store_metrics.h"

namespace deployd {

// The failure classes of deployd_failures_total, each reported for every plan (0 when none).
inline constexpr const char* kFailureClasses[] = {"exit",      "fail_on", "interrupted", "other",
                                                  "preflight", "stall",   "timeout",     "verify"};

// What deployd says of itself besides the store's counts.
struct DaemonFigures {
  StorageFault fault;  // now: inactive when the store takes writes
  StorageFaultTotals fault_totals;
  size_t waiting_transitions = 0;
  SelfUsage self;
  std::int64_t now_ms = 0;
};
DaemonFigures FiguresOf(const RunManager& runs);

// The metric families of what deployd's parts say. Pure.
std::vector<MetricFamily> MetricFamilies(const StoreMetrics& store, const DaemonFigures& daemon);

// The families read now; fails when the store cannot be read.
Result<std::vector<MetricFamily>> CollectMetrics(RunStore& store, const RunManager& runs);

// The same as the text exposition (what the textfile and `/metrics` hold).
Result<std::string> RenderMetrics(RunStore& store, const RunManager& runs);

// `metrics`.
boost::json::object HandleMetrics(RequestContext& context);

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_METRICS_REPORT_H_
