// deployctl's verbs that do more than one request and print its answer: each in its own
// ctl_*.cc file, called by deployctl_main.cc once the command line is parsed. Each returns
// deployctl's exit code (include/deployd/protocol.h) or ends with ctl::Die.
#ifndef DEPLOYD_CTL_CTL_VERBS_H_
#define DEPLOYD_CTL_CTL_VERBS_H_

#include <boost/json/object.hpp>
#include <map>
#include <string>

#include "ctl/ctl_client.h"

namespace CLI {
class App;
}

namespace deployd::ctl {

// Prints a run's transitions as plain lines as they are committed (and a line per progress
// sample, at most one per step every 10 s) until it ends; then the outcome and, for a failed
// run, the failing step's evidence. `announce` prints "following run RUN" first.
int FollowPlain(Client& client, const std::string& run_id, bool announce);
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

// `deployctl metrics [--json]` (ctl_metrics.cc): the verb on the command line, and what it does.
CLI::App* DefineMetricsVerb(CLI::App& app, bool& json_out);
int Metrics(Client& client, bool json_out);

// Prints a step's output as it grows until the step has ended and its processes have exited
// (ctl_logs.cc).
int LogsFollow(Client& client, const std::string& run_id, const std::string& step_id);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_CTL_VERBS_H_
