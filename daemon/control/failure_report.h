// FailureReport: the evidence of a run gathered into one object, for `deployctl why`: the step
// that failed, its reason and evidence (the failing check's last answer, the exit status, the
// output tail), the last lines of its log, and the run's timeline. Reads the step's log file;
// everything else comes from the caller (the store's records).
#ifndef DEPLOYD_CONTROL_FAILURE_REPORT_H_
#define DEPLOYD_CONTROL_FAILURE_REPORT_H_

#include <boost/json/object.hpp>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "store/run_store.h"

namespace deployd {

// {"run", "plan", "state", "failed", "reason", "created_at_ms", "finished_at_ms",
//  "failing_step": {"id", "phase", "attempts", "reason", "exit_status", "evidence", "log_path",
//                   "log_tail": [...]} or null,
//  "preflight": the failed preflight check's evidence (only when preflight failed),
//  "timeline": [{"offset_ms", "at_ms", "step", "kind", "state", "detail"}, …]}
// (`why` adds "storage_fault": "cannot record: …" while deployd cannot record the run.)
// The failing step is the first failed main step, else the first failed on_failure step.
boost::json::object FailureReport(const RunRecord& run, const std::vector<EventRecord>& events,
                                  const std::function<std::string(const std::string&)>& log_path);

// The last `count` lines of a log file (and of its rotated predecessor PATH.1 when the file
// holds fewer), reading at most the last 64 KiB of each. A line rewritten with '\r' (a progress
// bar) is given as a terminal would show it: its text after the last '\r'.
std::vector<std::string> LogTail(const std::string& path, std::size_t count);

inline constexpr std::size_t kWhyLogLines = 20;

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_FAILURE_REPORT_H_
