// deployctl: the command-line client of deployd (DESIGN.md §3). `validate` works offline;
// every other verb talks to the daemon over its Unix socket, one JSON line each way. Verbs
// with more to them than a request and its answer live in ctl_*.cc (ctl_verbs.h).
#include <CLI/CLI.hpp>
#include <boost/json.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "ctl/ctl_client.h"
#include "ctl/ctl_verbs.h"
#include "ctl/dial_stdio.h"
#include "ctl/plan_input.h"
#include "ctl/rollout_verbs.h"
#include "ctl/ssh_transport.h"
#include "ctl/watch_view.h"
#include "deployd/protocol.h"
#include "deployd/states.h"
#include "plan/daemon_config.h"
#include "plan/plan_parser.h"
#include "protocol/answer.h"
#include "protocol/follow_stream.h"
#include "protocol/run_wire.h"
#include "util/utf8_text.h"

using namespace deployd;
using namespace deployd::ctl;
namespace json = boost::json;

namespace {

void PrintRun(const WireRun& run) {
  std::cout << "run:     " << run.id << " (plan " << run.plan << ", from " << run.plan_file
            << ")\n";
  std::cout << "state:   " << run.state;
  if (!run.reason.empty()) std::cout << ": " << run.reason;
  if (!run.storage_fault.empty()) std::cout << "\nstorage: deployd " << run.storage_fault;
  std::cout << "\ncreated: " << Clock(run.created_at_ms);
  if (run.finished_at_ms)
    std::cout << ", took " << FormatElapsed(run.finished_at_ms - run.created_at_ms);
  std::cout << "\n\n";
  std::printf("%-24s %-10s %-8s %-8s %s\n", "STEP", "STATE", "ATTEMPTS", "TIME", "DETAIL");
  std::fflush(stdout);
  for (const WireStep& s : run.steps) {
    std::int64_t start = s.started_at_ms;
    std::int64_t end = s.finished_at_ms;
    std::string time = start ? FormatElapsed((end ? end : start) - start) : "-";
    std::string detail = s.reason;
    if (s.phase == "on_failure") detail = "(on_failure) " + detail;
    std::printf("%-24s %-10s %-8lld %-8s %s\n", s.id.c_str(), s.state.c_str(),
                static_cast<long long>(s.attempts), time.c_str(), detail.c_str());
  }
  for (const WireStep& s : run.steps) {
    if (!s.evidence || !s.evidence->is_object()) continue;
    std::string line = BenchmarkLine(s.evidence->as_object());
    if (!line.empty()) std::printf("\nbenchmark of %s: %s\n", s.id.c_str(), line.c_str());
  }
  std::fflush(stdout);
}

// Bad plans are refused here, before the daemon is involved: every problem goes to stderr.
bool ValidLocally(const std::string& text, const std::string& path,
                  const std::map<std::string, std::string>& vars) {
  ParseResult parsed = ParsePlan(text, path, vars);
  for (const auto& d : parsed.errors) std::cerr << d.Format() << "\n";
  return parsed.plan.has_value();
}

int Validate(const std::vector<std::string>& plans, const std::vector<std::string>& var_args) {
  auto vars = ParseVars(var_args);
  bool bad = false;
  for (const auto& path : plans) {
    ParseResult r = ParsePlan(ReadPlan(path), path, vars);
    for (const auto& d : r.errors) std::cerr << d.Format() << "\n";
    if (r.plan) {
      std::cout << path << ": ok (plan " << r.plan->name << ", " << r.plan->steps.size()
                << " steps)\n";
    } else {
      bad = true;
    }
  }
  return bad ? kExitUsage : kExitOk;
}

// `apply`: the plan is checked here first, then sent with its variables; prints the run id.
int ApplyPlan(const std::string& socket_path, const std::string& path,
              const std::vector<std::string>& var_args, bool wait, bool wait_lock) {
  auto vars = ParseVars(var_args);
  std::string text = ReadPlan(path);
  if (!ValidLocally(text, path, vars)) return kExitUsage;
  Client client(socket_path);
  json::object vars_json;
  for (const auto& [k, v] : vars) vars_json[k] = v;
  json::object request{
      {"op", "apply"}, {"plan_text", text}, {"plan_file", ValidUtf8(path)}, {"vars", vars_json}};
  if (wait_lock) request["wait_lock"] = true;
  client.Send(request);
  json::object answer = client.Receive();
  if (!answer["ok"].as_bool()) {
    if (const json::value* d = answer.if_contains("diagnostics"))
      for (const auto& line : d->as_array()) std::cerr << line.as_string().c_str() << "\n";
    Client::Refused(answer);
  }
  std::string id = Str(answer, "run");
  std::cout << id << std::endl;
  return wait ? FollowPlain(client, id, false) : kExitOk;
}

int DryRun(const std::string& socket_path, const std::string& path,
           const std::vector<std::string>& var_args, bool json_out) {
  auto vars = ParseVars(var_args);
  std::string text = ReadPlan(path);
  if (!ValidLocally(text, path, vars)) return kExitUsage;
  Client client(socket_path);
  return PlanDryRun(client, path, text, vars, json_out);
}

// `watch --json`: the follow stream's lines as they come.
int WatchJson(Client& client, const std::string& run_id) {
  client.Send({{"op", "follow"}, {"run", run_id}});
  for (;;) {
    json::object line = client.Receive();
    if (IsRefusal(line)) Client::Refused(line);
    std::cout << json::serialize(line) << std::endl;
    if (LineType(line) == "end") return ExitFor(LineRun(line).state);
  }
}

int ListRuns(Client& client, bool json_out) {
  json::object answer = client.Call({{"op", "runs"}});
  if (json_out) {
    std::cout << json::serialize(answer["runs"]) << "\n";
    return kExitOk;
  }
  std::printf("%-28s %-20s %-10s %-20s %s\n", "RUN", "PLAN", "STATE", "CREATED", "REASON");
  for (const auto& rv : answer["runs"].as_array()) {
    WireRun r = DecodeRun(rv.as_object());
    std::printf("%-28s %-20s %-10s %-20s %s\n", r.id.c_str(), r.plan.c_str(), r.state.c_str(),
                Clock(r.created_at_ms).c_str(), r.reason.c_str());
  }
  return kExitOk;
}

int ShowStatus(Client& client, const std::string& run_id, bool json_out) {
  json::object answer = client.Call({{"op", "status"}, {"run", run_id}});
  const json::object& run_json = answer["run"].as_object();
  WireRun run = DecodeRun(run_json);
  if (json_out) {
    std::cout << json::serialize(run_json) << "\n";
  } else {
    PrintRun(run);
  }
  return ExitFor(run.state);
}

int ShowLogs(Client& client, const std::string& run_id, const std::string& step_id, bool json_out) {
  json::object request{{"op", "logs"}, {"run", run_id}};
  if (!step_id.empty()) request["step"] = step_id;
  json::object answer = client.Call(request);
  if (json_out) {
    std::cout << json::serialize(answer["logs"]) << "\n";
    return kExitOk;
  }
  const auto& entries = answer["logs"].as_array();
  for (const auto& ev : entries) {
    const json::object& e = ev.as_object();
    if (step_id.empty()) std::cout << "==> " << Str(e, "step") << " <==\n";
    std::cout << Str(e, "text");
  }
  return kExitOk;
}

// The command line: the verb chosen and what was given with it.
struct Args {
  std::string socket_path;
  std::string host;
  std::vector<std::string> plans;
  std::vector<std::string> var_args;
  std::string run_id;
  std::string step_id;
  bool json_out = false;
  bool wait = false;
  bool wait_lock = false;
  bool follow = false;
  std::string plan_name;
  int limit = 20;
};

struct Verbs {
  CLI::App* validate;
  CLI::App* apply;
  CLI::App* plan;
  CLI::App* runs;
  CLI::App* status;
  CLI::App* watch;
  CLI::App* logs;
  CLI::App* why;
  CLI::App* cancel;
  CLI::App* retry;
  CLI::App* skip;
  CLI::App* pause;
  CLI::App* resume;
  CLI::App* approve;
  CLI::App* dial_stdio;
  CLI::App* history;
  CLI::App* metrics;
};

// The fleet's verbs (rollout_verbs.h) and what was given with them.
struct FleetVerbs {
  CLI::App* rollout;
  CLI::App* batch;
  RolloutOptions options;
  std::string key;
  std::string batch_arg;
};

void DefineFleetVerbs(CLI::App& app, FleetVerbs& f) {
  RolloutOptions& o = f.options;
  f.rollout = app.add_subcommand(
      "rollout", "apply a plan across the hosts of an Ansible inventory, in batches, over ssh");
  f.rollout->add_option("plan", o.plan, "plan file")->required();
  f.rollout->add_option("-i,--inventory", o.inventory, "Ansible inventory (INI or YAML)")
      ->required();
  f.rollout->add_option("-l,--limit", o.limit, "only these hosts: an Ansible host pattern");
  f.rollout->add_option("--serial", o.serial,
                        "batch size, N or N% of the hosts; repeated: the sizes in turn, the last "
                        "one repeating (default: all at once)");
  f.rollout->add_option("--max-fail", o.max_fail,
                        "failed hosts a batch may have before the rollout stops, K or K% "
                        "(default 0)");
  f.rollout->add_option("--var", o.vars, "NAME=VALUE override, for every host");
  f.rollout->add_option("--unreachable-after", o.unreachable_after,
                        "how long a host may stay unreachable before it counts as failed "
                        "(default 10m)");
  f.rollout->add_flag("--wait", o.wait, "show the hosts live until the rollout ends");

  f.batch = app.add_subcommand("rollout-batch",
                               "drive one batch of a rollout (what a rollout's steps run)");
  f.batch->add_option("--key", f.key, "the rollout's key")->required();
  f.batch->add_option("--batch", f.batch_arg, "the batch, from 1, or all (the verdict)")
      ->required();
}

// watch, why and retry of a rollout take on all of its hosts; nullopt for another run.
std::optional<int> RolloutVerb(const Verbs& v, const Args& a, Client& client) {
  if (!(*v.watch || *v.why || *v.retry) || (*v.watch && a.json_out) || !a.step_id.empty())
    return std::nullopt;
  std::optional<RolloutRun> rollout = FindRollout(client, a.run_id);
  if (!rollout) return std::nullopt;
  if (*v.watch) return WatchRollout(client, *rollout);
  if (*v.why) return WhyRollout(*rollout, a.json_out);
  return RetryRollout(client, *rollout, a.wait);
}

Verbs DefineVerbs(CLI::App& app, Args& a) {
  Verbs v;
  v.validate = app.add_subcommand("validate", "check plans without running them (offline)");
  v.validate->add_option("plan", a.plans, "plan files")->required();
  v.validate->add_option("--var", a.var_args, "NAME=VALUE override");

  v.apply = app.add_subcommand("apply", "start a run of a plan; prints the run id first");
  v.apply->add_option("plan", a.plans, "plan file")->required()->expected(1);
  v.apply->add_option("--var", a.var_args, "NAME=VALUE override");
  v.apply->add_flag("--wait", a.wait, "show progress until the run ends; exit 1 if it fails");
  v.apply->add_flag("--wait-lock", a.wait_lock,
                    "when another run holds the plan's lock, queue this one after it");

  v.plan = app.add_subcommand(
      "plan", "dry run through deployd: the resolved steps, and which checks pass right now");
  v.plan->add_option("plan", a.plans, "plan file")->required()->expected(1);
  v.plan->add_option("--var", a.var_args, "NAME=VALUE override");
  v.plan->add_flag("--json", a.json_out, "print one JSON object");

  v.runs = app.add_subcommand("runs", "list runs, newest first");
  v.runs->add_flag("--json", a.json_out, "print a JSON array");

  v.status = app.add_subcommand("status", "show a run and its steps");
  v.status->add_option("run", a.run_id)->required();
  v.status->add_flag("--json", a.json_out, "print one JSON object");

  v.watch = app.add_subcommand("watch", "show a run live until it ends");
  v.watch->add_option("run", a.run_id)->required();
  v.watch->add_flag("--json", a.json_out, "print the follow stream: one JSON object per line");

  v.logs = app.add_subcommand("logs", "print the output of a run's steps");
  v.logs->add_option("run", a.run_id)->required();
  v.logs->add_option("step", a.step_id);
  v.logs->add_flag("-f,--follow", a.follow,
                   "print STEP's output as it grows, until the step has ended");
  v.logs->add_flag("--json", a.json_out, "print JSON");

  v.why = app.add_subcommand("why", "show the evidence of a failed run");
  v.why->add_option("run", a.run_id)->required();
  v.why->add_flag("--json", a.json_out, "print one JSON object");

  v.cancel = app.add_subcommand("cancel", "stop a run: its running step and all after it");
  v.cancel->add_option("run", a.run_id)->required();

  v.retry = app.add_subcommand("retry", "run a failed or cancelled run again from a step");
  v.retry->add_option("run", a.run_id)->required();
  v.retry->add_option("step", a.step_id, "default: the step that failed");
  v.retry->add_flag("--wait", a.wait, "show progress until the run ends");

  v.skip = app.add_subcommand("skip", "mark a step skipped and let its run go on");
  v.skip->add_option("run", a.run_id)->required();
  v.skip->add_option("step", a.step_id)->required();
  v.skip->add_flag("--wait", a.wait, "show progress until the run ends");

  v.pause = app.add_subcommand("pause", "start no new step until resumed");
  v.pause->add_option("run", a.run_id)->required();

  v.resume = app.add_subcommand("resume", "let a paused run go on");
  v.resume->add_option("run", a.run_id)->required();

  v.approve = app.add_subcommand("approve", "let an approval step that is waiting go on");
  v.approve->add_option("run", a.run_id)->required();
  v.approve->add_option("step", a.step_id)->required();

  v.dial_stdio = app.add_subcommand(
      "dial-stdio", "join stdin and stdout to deployd's socket (what --host runs on the host)");
  v.history = app.add_subcommand(
      "history", "what a plan's runs measured (version, tokens/s, TTFT), newest first");
  v.history->add_option("plan", a.plan_name, "the plan's name")->required();
  v.history->add_option("--limit", a.limit, "at most this many runs (default 20; 0: all)")
      ->check(CLI::NonNegativeNumber);
  v.history->add_flag("--json", a.json_out, "print one JSON object");
  v.metrics = DefineMetricsVerb(app, a.json_out);
  return v;
}

// The verbs that talk to a running daemon over one connection.
int RunClientVerb(const Verbs& v, const Args& a) {
  Client client(a.socket_path);
  if (std::optional<int> code = RolloutVerb(v, a, client)) return *code;
  const std::string& run_id = a.run_id;
  const std::string& step_id = a.step_id;
  if (*v.watch) return a.json_out ? WatchJson(client, run_id) : WatchRun(client, run_id);
  if (*v.why) return Why(client, run_id, a.json_out);
  if (*v.pause) {
    client.Call({{"op", "pause"}, {"run", run_id}});
    std::cout << "run " << run_id << " paused: its current step finishes, no new step starts "
              << "until `deployctl resume " << run_id << "`\n";
    return kExitOk;
  }
  if (*v.resume) {
    client.Call({{"op", "resume"}, {"run", run_id}});
    std::cout << "run " << run_id << " resumed\n";
    return kExitOk;
  }
  if (*v.approve) {
    client.Call({{"op", "approve"}, {"run", run_id}, {"step", step_id}});
    std::cout << "step " << step_id << " of run " << run_id << " approved\n";
    return kExitOk;
  }
  if (*v.runs) return ListRuns(client, a.json_out);
  if (*v.history) return History(client, a.plan_name, a.limit, a.json_out);
  if (*v.metrics) return Metrics(client, a.json_out);
  if (*v.status) return ShowStatus(client, run_id, a.json_out);
  if (*v.logs && a.follow) {
    if (step_id.empty()) Die(kExitUsage, "logs -f needs a STEP: the step whose output to follow");
    if (a.json_out) Die(kExitUsage, "logs -f prints the output as it is; --json is without -f");
    return LogsFollow(client, run_id, step_id);
  }
  if (*v.logs) return ShowLogs(client, run_id, step_id, a.json_out);
  if (*v.cancel) {
    client.Call({{"op", "cancel"}, {"run", run_id}});
    std::cout << "run " << run_id << " cancelled\n";
    return kExitOk;
  }
  if (*v.retry || *v.skip) {
    json::object request{{"op", *v.retry ? "retry" : "skip"}, {"run", run_id}};
    if (!step_id.empty()) request["step"] = step_id;
    client.Call(request);
    std::cout << "run " << run_id << " resumed\n";
    return a.wait ? FollowPlain(client, run_id, false) : kExitOk;
  }
  return kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"deployctl: control deployd, the deployment daemon"};
  app.require_subcommand(1);
  Args args;
  app.add_option("--socket", args.socket_path,
                 "deployd's socket (default: $DEPLOYD_SOCKET, else " + DefaultSocketPath() + ")");
  app.add_option("--host", args.host,
                 "reach deployd on another host through ssh: ssh://[USER@]HOST[:PORT] "
                 "(default: $DEPLOYD_HOST; --socket then names the socket there)");
  app.set_version_flag("--version", std::string("deployctl ") + DEPLOYD_VERSION);
  Verbs verbs = DefineVerbs(app, args);
  FleetVerbs fleet;
  DefineFleetVerbs(app, fleet);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }

  const std::string socket_flag = args.socket_path;
  if (args.socket_path.empty()) {
    const char* env = std::getenv("DEPLOYD_SOCKET");
    args.socket_path = env && *env ? env : DefaultSocketPath();
  }

  try {
    if (*verbs.validate) return Validate(args.plans, args.var_args);
    if (*verbs.dial_stdio) return DialStdio(args.socket_path);
    // A rollout's step talks to its own coordinator, whatever DEPLOYD_HOST it inherited.
    if (*fleet.batch) return RolloutBatch(args.socket_path, fleet.key, fleet.batch_arg);
    ChooseRemoteHost(args.host, socket_flag);
    if (*fleet.rollout) return Rollout(fleet.options, args.socket_path);
    if (*verbs.apply)
      return ApplyPlan(args.socket_path, args.plans[0], args.var_args, args.wait, args.wait_lock);
    if (*verbs.plan) return DryRun(args.socket_path, args.plans[0], args.var_args, args.json_out);
    return RunClientVerb(verbs, args);
  } catch (const Exit& e) {
    std::cerr << "deployctl: error: " << e.message << "\n";
    return e.code;
  }
}
