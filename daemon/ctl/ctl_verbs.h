// deployctl's verbs that do more than one request and print its answer: each in its own
// ctl_*.cc file, called by deployctl_main.cc once the command line is parsed. Each returns
// deployctl's exit code (include/deployd/protocol.h) or ends with ctl::Die.
#ifndef DEPLOYD_CTL_CTL_VERBS_H_
#define DEPLOYD_CTL_CTL_VERBS_H_

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "ctl/ctl_client.h"

namespace deployd::ctl {

// validate: each plan checked offline; exit 2 if any is invalid. --json: one array of
// {"file", "ok", "errors", "plan"?, "steps"?} (ctl_apply.cc).
int Validate(const std::vector<std::string>& plans, const std::vector<std::string>& var_args,
             bool json);
// A plan file read and checked here, with its --var values: every problem is printed on stderr
// and ends deployctl with exit status 2 before deployd is asked.
struct CheckedPlan {
  std::string path;
  std::string text;
  std::map<std::string, std::string> vars;
};
CheckedPlan CheckPlan(const std::string& path, const std::vector<std::string>& var_args);
struct ApplyOptions {
  bool wait = false;
  bool wait_lock = false;
  bool json_out = false;
};
// Starts a run of the plan and prints its id first (--json: {"run"}); --wait follows it.
int ApplyPlan(Client& client, const CheckedPlan& plan, const ApplyOptions& options);

// What `runs` was given, as typed; RunsFilter() checks it.
struct RunsOptions {
  std::string plan;
  std::string state;
  std::string since;  // a duration: created within the last SINCE
  std::string limit;
  std::string before;  // a run number: the runs numbered below it
  bool all = false;
};
// Which runs to list: the filters checked (a refusal ends deployctl with exit status 2 before
// deployd is asked), `since` as a time (deployctl's clock).
struct RunsQuery {
  RunsOptions typed;
  std::int64_t since_ms = 0;
  std::int64_t limit = 0;  // 0: every run that matches
  std::int64_t before = 0;
};
RunsQuery RunsFilter(const RunsOptions& options);
// The runs of `query`, newest first, asked a page at a time (ctl_records.cc); `next`: where
// more begin (0: none left), when `query` has a limit that they go beyond.
struct RunsFound {
  boost::json::array runs;
  std::int64_t next = 0;
};
RunsFound FindRuns(Client& client, const RunsQuery& query);
// "deployctl: 20 runs shown; the next 20: `deployctl runs --limit 20 --before 41` …".
std::string MoreRunsHint(const RunsQuery& query, std::int64_t next);

// runs and status (ctl_status.cc).
int ListRuns(Client& client, const RunsQuery& query, bool json);
int ShowStatus(Client& client, const std::string& run_id, bool json);

// show, delete and prune (ctl_records.cc): a run's record (and with `plan` the plan text it was
// applied with), and forgetting finished runs as deployd's `retention` does.
int ShowRun(Client& client, const std::string& run_id, bool plan, bool json);
int DeleteRun(Client& client, const std::string& run_id, bool json);
// The milliseconds of prune's --older-than, a duration; a refusal ends deployctl with exit
// status 2 before deployd is asked.
std::int64_t PruneAge(const std::string& older_than);
int Prune(Client& client, const std::string& older_than, std::int64_t older_than_ms, bool json);

// An operator's command: cancel, pause, resume, approve, retry, skip (ctl_commands.cc). Prints
// what was done, or with --json {"op", "run", "step"?, "state"} (the run's state after it);
// `wait` follows the run then.
struct OperatorCommand {
  std::string op;
  std::string run;
  std::string step;  // "" for none
  bool wait = false;
  bool json_out = false;
};
int RunCommand(Client& client, const OperatorCommand& command);
// deployctl's version and protocol, and those of the deployd `connect` reaches (exit 3, saying
// why, when it cannot be reached).
int Version(const std::function<std::unique_ptr<Client>()>& connect, bool json);

// Prints a run's transitions as plain lines as they are committed (and a line per progress
// sample, at most one per step every 10 s) until it ends; then the outcome and, for a failed
// run, the failing step's evidence. `announce` prints "following run RUN" first.
int FollowPlain(Client& client, const std::string& run_id, bool announce);
// The follow stream itself, one JSON object per line, until its "end" line (`watch --json`);
// after a reconnection, a fresh snapshot line and the events after the last one printed.
int FollowJson(Client& client, const std::string& run_id);
// The `follow` request that goes on after event `after_seq` (0: from the start).
boost::json::object FollowRequest(const std::string& run_id, std::int64_t after_seq);
// Whether `line` is an event up to `last_seq`, which a follow that reconnected has shown
// already; else moves `last_seq` on to it.
bool SeenBefore(const boost::json::object& line, std::int64_t& last_seq);
// The live table (redrawn in place on a terminal, `isatty(stdout)`), or FollowPlain.
int WatchRun(Client& client, const std::string& run_id);
// Prints the evidence of a failed run (ctl_why.cc).
int Why(Client& client, const std::string& run_id, bool json);
// A dry run of a plan through deployd (ctl_plan.cc).
int PlanDryRun(Client& client, const std::string& path, const std::string& text,
               const std::map<std::string, std::string>& vars, bool json);

// What a plan's runs measured, newest first, at most `limit` (0: all the daemon gives)
// (ctl_history.cc).
int History(Client& client, const std::string& plan, int limit, bool json);
// A step's benchmark figures in one line, with its baseline, from the step's evidence; "" when
// it has none.
std::string BenchmarkLine(const boost::json::object& evidence);

// `deployctl metrics [--json]` (ctl_metrics.cc): what deployd exports to Prometheus.
int Metrics(Client& client, bool json_out);

struct LogsOptions {
  bool json_out = false;
  bool timestamps = false;  // each line after the time it was written
};
// Prints the output of a run's steps, or of `step_id` ("" for all), with a line where each
// attempt begins (ctl_logs.cc, log_printer.h).
int ShowLogs(Client& client, const std::string& run_id, const std::string& step_id,
             const LogsOptions& options);
// Prints a step's output as it grows until the step has ended and its processes have exited;
// `json_out`: the stream's lines as deployd sends them (ctl_logs.cc).
int LogsFollow(Client& client, const std::string& run_id, const std::string& step_id,
               const LogsOptions& options);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_CTL_VERBS_H_
