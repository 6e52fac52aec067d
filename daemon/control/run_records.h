// The requests about runs' records as a whole (include/deployd/protocol.h): `runs` — the runs a
// filter selects, newest first, a page at a time; `show` — one run's record, and the plan text
// it was applied with when asked; `delete` and `prune` — finished runs forgotten, record,
// events and logs, as `retention` forgets them. Every refusal of a bad request is one line for
// humans, pinned by tests/run_records_test.cc.
//
// One thread: the daemon's io_context, where the RunManager and the RunStore live.
#ifndef DEPLOYD_CONTROL_RUN_RECORDS_H_
#define DEPLOYD_CONTROL_RUN_RECORDS_H_

#include <boost/json/object.hpp>
#include <string>

#include "control/request_handlers.h"

namespace deployd {

// The most runs one `runs` answer holds, and one `prune` forgets: what one request may cost.
inline constexpr int kMaxRunsPerRequest = 1000;

// {"plan"?, "state"?, "since_ms"?, "limit"?, "before_seq"?} → {"runs": [RUN…], "next"?:
// {"before_seq"}}: at most "limit" runs (kMaxRunsPerRequest without it, or above it), newest
// first; "next" is there when more match, the members to send with the same filters for them.
boost::json::object HandleRuns(RequestContext& context, const boost::json::object& request);
// → {"run": RUN without its steps, with "applied_by"; "plan_text" too with `plan_text`}.
boost::json::object HandleShow(RequestContext& context, const std::string& run, bool plan_text);
// → {"deleted": [RUN]}; refused for a run that has not finished, naming its state.
boost::json::object HandleDelete(RequestContext& context, const std::string& run);
// {"older_than_ms"} → {"deleted": [RUN…], "more"}: the runs that finished more than that long
// ago, at most kMaxRunsPerRequest, oldest first; "more" when others may be left.
boost::json::object HandlePrune(RequestContext& context, const boost::json::object& request);

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_RUN_RECORDS_H_
