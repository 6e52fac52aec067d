// deployctl's verbs about runs' records as a whole: which runs `runs` lists (its filters
// checked here, its pages asked for one after the other), `show` (a run's record, and the plan
// text it was applied with), `delete` and `prune` (finished runs forgotten, as deployd's
// `retention` forgets them).
#include <boost/json.hpp>
#include <iostream>

#include "ctl/ctl_verbs.h"
#include "ctl/did_you_mean.h"
#include "ctl/terminal_screen.h"
#include "ctl/watch_view.h"
#include "deployd/protocol.h"
#include "deployd/states.h"
#include "protocol/run_wire.h"
#include "util/clock.h"
#include "util/units.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

// The whole number `text` of `flag`, at least 1.
std::int64_t Positive(const std::string& flag, const std::string& text, const std::string& hint) {
  std::optional<std::int64_t> n = ParseInteger(text);
  if (!n || *n < 1)
    Die(kExitUsage, flag + " must be a whole number from 1, not '" + text + "' (" + hint + ")");
  return *n;
}

std::int64_t Age(const std::string& flag, const std::string& text) {
  std::optional<std::chrono::milliseconds> d = ParseDuration(text);
  if (!d) Die(kExitUsage, flag + ": invalid duration '" + text + "' (expected e.g. 2h, 7d)");
  return d->count();
}

void CheckState(const std::string& state) {
  if (ParseRunState(state)) return;
  std::vector<std::string> names = RunStateNames();
  std::string suggestion = DidYouMean(state, names);
  std::string list;
  for (size_t i = 0; i < names.size(); ++i)
    list += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + names[i];
  Die(kExitUsage,
      "--state: no run is '" + state + "' (" +
          (suggestion.empty() ? "a run is " + list : "did you mean " + suggestion + "?") + ")");
}

}  // namespace

RunsQuery RunsFilter(const RunsOptions& options) {
  RunsQuery query{options};
  if (options.all && !options.limit.empty())
    Die(kExitUsage, "--limit and --all do not go together (--all: every run that matches)");
  if (!options.state.empty()) CheckState(options.state);
  if (!options.since.empty()) query.since_ms = NowMs() - Age("--since", options.since);
  if (!options.limit.empty())
    query.limit = Positive("--limit", options.limit, "without it, every run that matches");
  if (!options.before.empty())
    query.before = Positive("--before", options.before, "a run's number: demo-41 is 41");
  return query;
}

RunsFound FindRuns(Client& client, const RunsQuery& query) {
  RunsFound found;
  std::int64_t before = query.before;
  for (;;) {
    json::object request{{"op", "runs"}};
    if (!query.typed.plan.empty()) request["plan"] = query.typed.plan;
    if (!query.typed.state.empty()) request["state"] = query.typed.state;
    if (query.since_ms > 0) request["since_ms"] = query.since_ms;
    if (query.limit > 0) request["limit"] = query.limit - std::int64_t(found.runs.size());
    if (before > 0) request["before_seq"] = before;
    json::object answer = client.Call(request);
    for (json::value& run : answer["runs"].as_array()) found.runs.push_back(std::move(run));
    const json::object* next = answer.contains("next") ? answer["next"].if_object() : nullptr;
    before = next ? Int(*next, "before_seq") : 0;
    if (before <= 0) return found;
    if (query.limit > 0 && std::int64_t(found.runs.size()) >= query.limit) {
      found.next = before;
      return found;
    }
  }
}

std::string MoreRunsHint(const RunsQuery& query, std::int64_t next) {
  std::string filters;
  const RunsOptions& o = query.typed;
  if (!o.plan.empty()) filters += " --plan " + o.plan;
  if (!o.state.empty()) filters += " --state " + o.state;
  if (!o.since.empty()) filters += " --since " + o.since;
  const std::string n = std::to_string(query.limit);
  return "deployctl: more runs match; the next " + n + ": `deployctl runs" + filters + " --limit " +
         n + " --before " + std::to_string(next) + "`, all of them: `deployctl runs" + filters +
         " --all`";
}

int ShowRun(Client& client, const std::string& run_id, bool plan, bool json_out) {
  json::object request{{"op", "show"}, {"run", run_id}};
  if (plan) request["plan_text"] = true;
  json::object answer = client.Call(request);
  json::object& run_json = answer["run"].as_object();
  const std::string text = Str(answer, "plan_text");
  if (json_out) {
    if (plan) run_json["plan_text"] = text;
    std::cout << json::serialize(run_json) << "\n";
    return kExitOk;
  }
  WireRun run = DecodeRun(run_json);
  const std::int64_t now = NowMs();
  std::cout << "run:        " << run.id << "\nplan:       " << run.plan << ", from "
            << run.plan_file
            << "\nstate:      " << (StdoutStyle().color ? Paint(run.state, run.state) : run.state)
            << (run.reason.empty() ? "" : ": " + run.reason)
            << "\ncreated:    " << When(run.created_at_ms, now) << "\n";
  if (run.finished_at_ms)
    std::cout << "finished:   " << When(run.finished_at_ms, now) << ", after "
              << FormatElapsed(run.finished_at_ms - run.created_at_ms) << "\n";
  std::cout << "applied by: "
            << (run.applied_by.empty() ? "not recorded (a run of an older deployd)"
                                       : run.applied_by)
            << "\n";
  if (!run.key.empty()) std::cout << "key:        " << run.key << "\n";
  std::cout << "vars:       " << (run.vars.empty() ? "none (the plan's own values)" : "");
  const char* between = "";
  for (const auto& [name, value] : run.vars) {
    std::cout << between << name << "=" << value;
    between = "\n            ";
  }
  std::cout << "\n";
  if (plan) {
    // The text as it was applied, byte for byte; a secret's value is never in it.
    std::cout << "\n# the plan as applied (secrets are never stored: only where each is read "
                 "from)\n"
              << text << (text.empty() || text.back() == '\n' ? "" : "\n");
  }
  std::cout.flush();
  return kExitOk;
}

int DeleteRun(Client& client, const std::string& run_id, bool json_out) {
  json::object answer = client.Call({{"op", "delete"}, {"run", run_id}});
  const json::array& deleted = answer["deleted"].as_array();
  if (json_out) {
    std::cout << json::serialize(json::object{
                     {"op", "delete"}, {"deleted", deleted}, {"count", deleted.size()}})
              << "\n";
  } else {
    std::cout << "deleted run " << run_id << ": its record, events and logs\n";
  }
  return kExitOk;
}

std::int64_t PruneAge(const std::string& older_than) { return Age("--older-than", older_than); }

int Prune(Client& client, const std::string& older_than, std::int64_t older_than_ms,
          bool json_out) {
  json::array deleted;
  // deployd forgets a bounded number of runs an answer; what is left, the next request does.
  for (bool more = true; more;) {
    json::object answer = client.Call({{"op", "prune"}, {"older_than_ms", older_than_ms}});
    for (json::value& id : answer["deleted"].as_array()) deleted.push_back(std::move(id));
    const json::value* m = answer.if_contains("more");
    more = m && m->is_bool() && m->as_bool();
  }
  if (json_out) {
    std::cout << json::serialize(json::object{{"op", "prune"},
                                              {"older_than", older_than},
                                              {"deleted", deleted},
                                              {"count", deleted.size()}})
              << "\n";
    return kExitOk;
  }
  if (deleted.empty()) {
    std::cout << "no run finished more than " << older_than << " ago; nothing was deleted\n";
    return kExitOk;
  }
  std::cout << "deleted " << deleted.size() << (deleted.size() == 1 ? " run" : " runs")
            << " that finished more than " << older_than << " ago (record, events and logs):";
  const char* between = " ";
  for (const json::value& id : deleted) {
    std::cout << between << (id.is_string() ? std::string(id.as_string()) : "?");
    between = ", ";
  }
  std::cout << "\n";
  return kExitOk;
}

}  // namespace deployd::ctl
