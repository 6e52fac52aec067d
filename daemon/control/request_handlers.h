// The control protocol's requests (include/deployd/protocol.h), one handler per request type:
// from a decoded request (the line's JSON object) to its answer. The socket, the peer's
// credentials and the framing are ControlServer's (control_server.h); the streams (`follow`,
// `logs -f`) are answer_streams.h's. Every refusal of a bad request is one line for humans,
// pinned by tests/request_handlers_test.cc.
//
// One thread: the daemon's io_context, where the RunManager and the RunStore live.
#ifndef DEPLOYD_CONTROL_REQUEST_HANDLERS_H_
#define DEPLOYD_CONTROL_REQUEST_HANDLERS_H_

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "deployd/status.h"
#include "engine/run_manager.h"
#include "store/run_store.h"

namespace deployd {

// What a handler works with: the daemon's runs and store, and who asked.
struct RequestContext {
  RunManager& runs;
  RunStore& store;
  std::string peer;  // "alice (uid 1000)": who asked, for the records of what they did
};

// A request line as a JSON object, with a protocol version this daemon speaks and an "op";
// else the answer that refuses it ("bad request: not a JSON object", …).
Result<boost::json::object> DecodeRequest(const std::string& line);
// Its "op". REQUIRES: DecodeRequest accepted it.
std::string RequestOp(const boost::json::object& request);

// A plan submitted with `apply` or `plan`: {"plan_text", "plan_file"?, "vars"?}.
struct PlanSubmission {
  std::string text;
  std::string file = "plan";
  std::map<std::string, std::string> vars;
};
// `op` names the request in the refusal ("bad request: apply needs \"plan_text\"").
Result<PlanSubmission> DecodePlanSubmission(const boost::json::object& request,
                                            const std::string& op);

// The answer to every request that is neither a stream nor `apply` or `plan` (which are
// coroutines, below), by its "op" (`runs`, `show`, `delete` and `prune`: run_records.h), given to
// `reply` — at once, or for `cancel` once the run is cancelled (every process of it gone). An op
// this daemon does not know is refused ("bad request: unknown op 'x'").
using Reply = std::function<void(boost::json::object answer)>;
void Answer(RequestContext& context, const boost::json::object& request, Reply reply);

boost::json::object HandlePing();
// `apply`: the plan is parsed aside (plan_parsing.h), then the run is recorded and started on
// the daemon's thread; the answer is due before the run's first step can start (the caller
// sends it at once, before it yields).
boost::asio::awaitable<boost::json::object> HandleApply(RequestContext& context,
                                                        boost::json::object request);
// The operator's commands: "run" (and "step" where the command needs one) are checked by
// Answer().
void HandleCancel(RequestContext& context, const std::string& run, Reply reply);
boost::json::object HandlePause(RequestContext& context, const std::string& run);
boost::json::object HandleResume(RequestContext& context, const std::string& run);
boost::json::object HandleApprove(RequestContext& context, const std::string& run,
                                  const std::string& step);
// `step` "" retries from the first unfinished step.
boost::json::object HandleRetry(RequestContext& context, const std::string& run,
                                const std::string& step);
boost::json::object HandleSkip(RequestContext& context, const std::string& run,
                               const std::string& step);
// The reads of one recorded run.
boost::json::object HandleStatus(RequestContext& context, const RunRecord& run);
boost::json::object HandleWhy(RequestContext& context, const RunRecord& run);
// Each step's log (the newest MiB of it and of its rotated predecessor) with where its attempts
// begin, and with `timestamps` when its lines were written (protocol/follow_stream.h,
// AddLogMarks); `step` nullopt: all steps that have output or have run.
boost::json::object HandleLogs(RequestContext& context, const RunRecord& run,
                               const std::optional<std::string>& step, bool timestamps = false);
// `plan`: a dry run (plan_preview.h).
boost::asio::awaitable<boost::json::object> HandlePlan(boost::json::object request);

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_REQUEST_HANDLERS_H_
