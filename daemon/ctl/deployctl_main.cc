// deployctl: the command-line client of deployd (DESIGN.md §3). `validate` works offline;
// every other verb talks to the daemon over its Unix socket, one JSON line each way.
//
// Every verb is one entry of kVerbs below: its name, its summary, what it takes (positionals
// and flags) and what it runs, and the examples of its --help. What a verb runs lives in a
// ctl_*.cc file of its own (ctl_verbs.h, rollout_verbs.h). The global options (--socket,
// --host, --config) may come anywhere on the line; the socket is found only when a verb
// connects (socket_discovery.h), so that `validate` needs no deployd nor its configuration.
#include <CLI/CLI.hpp>
#include <iostream>

#include "ctl/ctl_client.h"
#include "ctl/ctl_verbs.h"
#include "ctl/dial_stdio.h"
#include "ctl/did_you_mean.h"
#include "ctl/rollout_verbs.h"
#include "ctl/socket_discovery.h"
#include "ctl/ssh_transport.h"
#include "deployd/protocol.h"
#include "plan/daemon_config.h"

using namespace deployd;
using namespace deployd::ctl;

namespace {

// The command line: the global options, and what the verb chosen was given.
struct Args {
  std::string socket_flag;
  std::string config_flag;
  std::string host;
  std::vector<std::string> plans;
  std::vector<std::string> var_args;
  std::string run_id;
  std::string step_id;
  bool json_out = false;
  bool wait = false;
  bool wait_lock = false;
  bool follow = false;
  bool timestamps = false;
  std::string plan_name;
  int limit = 20;
  RunsOptions runs;
  bool show_plan = false;
  std::string older_than;
  RolloutOptions rollout;
  std::string key;
  std::string batch;
  mutable std::optional<SocketChoice> where;

  // The socket of the local deployd, found as socket_discovery.h says (once); with --host,
  // the socket there (--socket, else that host's own choice).
  const SocketChoice& Where() const {
    if (!where)
      where = RemoteHost() ? SocketChoice{socket_flag} : DiscoverSocket(socket_flag, config_flag);
    return *where;
  }
  std::string Socket() const { return Where().path; }
  OperatorCommand For(const char* op) const { return {op, run_id, step_id, wait, json_out}; }
};

// Where a verb's deployd is: none (offline), the local one whatever DEPLOYD_HOST says (what
// ssh and a rollout's steps run), or the one --host names.
enum class Reach { kOffline, kLocal, kAny };

struct Verb {
  const char* name;
  const char* summary;
  Reach reach;
  void (*define)(CLI::App& verb, Args& args);
  std::function<int(Args& args)> run;
  const char* examples;     // its --help ends with them,
  const char* exit_status;  // and with what it exits with
};

// ---- what the verbs take

void RunArg(CLI::App& v, Args& a) {
  v.add_option("RUN", a.run_id, "the run's id, e.g. demo-3 (`deployctl runs` lists them)")
      ->required();
}
void StepArg(CLI::App& v, Args& a, const std::string& what) {
  v.add_option("STEP", a.step_id, what);
}
void RequiredStepArg(CLI::App& v, Args& a, const std::string& what) {
  v.add_option("STEP", a.step_id, what)->required();
}
void PlanArg(CLI::App& v, Args& a) {
  v.add_option("PLAN", a.plans, "the plan file (YAML, deployd-plan(5))")->required()->expected(1);
}
void VarOption(CLI::App& v, std::vector<std::string>& vars, const std::string& what) {
  v.add_option("--var", vars, what);
}
void JsonFlag(CLI::App& v, Args& a, const std::string& what) {
  v.add_flag("--json", a.json_out, what);
}
void WaitFlag(CLI::App& v, Args& a) {
  v.add_flag("--wait", a.wait, "show progress until the run ends; exit 1 if it fails");
}

// RUN and --json, all that most commands take.
void RunAndJson(CLI::App& v, Args& a, const std::string& what) {
  RunArg(v, a);
  JsonFlag(v, a, what);
}
constexpr const char* kDoneJson = "print {\"op\", \"run\", \"state\"}";
constexpr const char* kDoneWithStepJson =
    "print {\"op\", \"run\", \"step\", \"state\"}; with --wait, then the follow stream";

// ---- what the verbs run

// A verb that needs nothing but a connection to deployd and its arguments.
std::function<int(Args&)> Connected(int (*run)(Client&, Args&)) {
  return [run](Args& a) {
    Client client(a.Where());
    return run(client, a);
  };
}

// An operator's command on a run.
std::function<int(Args&)> Steer(const char* op) {
  return [op](Args& a) {
    Client client(a.Where());
    return RunCommand(client, a.For(op));
  };
}

std::unique_ptr<Client> Connect(const Args& a) { return std::make_unique<Client>(a.Where()); }

// watch, why and retry of a rollout take on all of its hosts; nullopt for another run.
std::optional<int> AsRollout(const Args& a, Client& client, const std::string& verb) {
  if ((verb == "watch" && a.json_out) || !a.step_id.empty()) return std::nullopt;
  std::optional<RolloutRun> rollout = FindRollout(client, a.run_id);
  if (!rollout) return std::nullopt;
  if (verb == "watch") return WatchRollout(client, *rollout);
  if (verb == "why") return WhyRollout(*rollout, a.json_out);
  return RetryRollout(client, *rollout, a.wait);
}

int RunWatch(Client& client, Args& a) {
  if (std::optional<int> code = AsRollout(a, client, "watch")) return *code;
  return a.json_out ? FollowJson(client, a.run_id) : WatchRun(client, a.run_id);
}

int RunLogs(Client& client, Args& a) {
  LogsOptions options{a.json_out, a.timestamps};
  if (!a.follow) return ShowLogs(client, a.run_id, a.step_id, options);
  if (a.step_id.empty()) Die(kExitUsage, "logs -f needs a STEP: the step whose output to follow");
  return LogsFollow(client, a.run_id, a.step_id, options);
}

int RunApply(Args& a) {
  CheckedPlan plan = CheckPlan(a.plans[0], a.var_args);
  Client client(a.Where());
  return ApplyPlan(client, plan, {a.wait, a.wait_lock, a.json_out});
}

int RunPlan(Args& a) {
  CheckedPlan plan = CheckPlan(a.plans[0], a.var_args);
  Client client(a.Where());
  return PlanDryRun(client, plan.path, plan.text, plan.vars, a.json_out);
}

int RunRetry(Client& client, Args& a) {
  if (std::optional<int> code = AsRollout(a, client, "retry")) return *code;
  return RunCommand(client, a.For("retry"));
}

int RunWhy(Client& client, Args& a) {
  if (std::optional<int> code = AsRollout(a, client, "why")) return *code;
  return Why(client, a.run_id, a.json_out);
}

void RunsFlags(CLI::App& v, Args& a) {
  RunsOptions& o = a.runs;
  v.add_option("--plan", o.plan, "only the runs of this plan (its name:, not its file)")
      ->type_name("PLAN_NAME");
  v.add_option("--state", o.state,
               "only the runs in this state: pending, running, paused, waiting, succeeded, "
               "failed or cancelled")
      ->type_name("STATE");
  v.add_option("--since", o.since, "only the runs created within the last DURATION (2h, 7d)")
      ->type_name("DURATION");
  v.add_option("--limit", o.limit, "at most N, the newest (then says how to see the next ones)")
      ->type_name("N");
  v.add_option("--before", o.before, "only the runs numbered below N (demo-41 is 41)")
      ->type_name("N");
  v.add_flag("--all", o.all, "every run that matches (what runs lists without --limit)");
  JsonFlag(v, a, "print a JSON array of runs as status --json");
}

// Usage errors are found before deployd is asked.
int RunRuns(Args& a) {
  RunsQuery query = RunsFilter(a.runs);
  Client client(a.Where());
  return ListRuns(client, query, a.json_out);
}

int RunPrune(Args& a) {
  std::int64_t older_than_ms = PruneAge(a.older_than);
  Client client(a.Where());
  return Prune(client, a.older_than, older_than_ms, a.json_out);
}

int RunRollout(Args& a) {
  if (a.json_out && a.rollout.wait)
    Die(kExitUsage,
        "rollout --json prints the rollout's run; follow it with "
        "`deployctl watch RUN --json`, without --wait");
  a.rollout.json_out = a.json_out;
  return Rollout(a.rollout, a.Socket());
}

// The verbs, in the order `deployctl --help` lists them.
const Verb kVerbs[] = {
    {"validate", "check plans without running them (offline)", Reach::kOffline,
     [](CLI::App& v, Args& a) {
       v.add_option("PLAN", a.plans, "plan files (YAML, deployd-plan(5))")->required();
       VarOption(v, a.var_args, "NAME=VALUE: a value for a variable the plans declare");
       JsonFlag(v, a, "print one JSON array: {\"file\", \"ok\", \"errors\", \"plan\", \"steps\"}");
     },
     [](Args& a) { return Validate(a.plans, a.var_args, a.json_out); },
     "  deployctl validate plans/*.yaml\n"
     "  deployctl validate plans/demo.yaml --var dir=/srv/demo",
     "Exit status: 0 every plan is valid, 2 one is not (each problem as FILE:LINE:COL)."},
    {"apply", "start a run of a plan; prints the run id first", Reach::kAny,
     [](CLI::App& v, Args& a) {
       PlanArg(v, a);
       VarOption(v, a.var_args, "NAME=VALUE: a value for a variable the plan declares");
       WaitFlag(v, a);
       v.add_flag("--wait-lock", a.wait_lock,
                  "when another run holds the plan's lock, queue this one after it");
       JsonFlag(v, a, "print {\"run\"}; with --wait, then the follow stream as watch --json");
     },
     RunApply,
     "  deployctl apply plans/demo.yaml --var dir=/srv/demo --wait\n"
     "  run=$(deployctl apply plans/demo.yaml | head -n1); deployctl watch \"$run\"",
     "Exit status: 0 started (--wait: succeeded), 1 --wait: the run failed or was cancelled,\n"
     "2 an invalid plan or a refusal (the plan's lock is held), 3 deployd cannot be reached."},
    {"plan", "dry run through deployd: the resolved steps, and which checks pass right now",
     Reach::kAny,
     [](CLI::App& v, Args& a) {
       PlanArg(v, a);
       VarOption(v, a.var_args, "NAME=VALUE: a value for a variable the plan declares");
       JsonFlag(v, a, "print one JSON object");
     },
     RunPlan, "  deployctl plan plans/kimi-k2.5-nvfp4.yaml --var model_dir=/srv/kimi",
     "Exit status: 0 preflight passes now, 1 a preflight check fails now, 2 an invalid plan,\n"
     "3 deployd cannot be reached."},
    {"runs", "list runs, newest first", Reach::kAny, RunsFlags, RunRuns,
     "  deployctl runs --state failed --since 7d\n"
     "  deployctl runs --plan demo --limit 20     (then: the command that shows the next 20)\n"
     "  deployctl runs --json | jq -r '.[] | select(.state == \"failed\") | .id'",
     "Exit status: 0, 2 a bad filter (a state that is none, a bad duration, ...), 3 deployd\n"
     "cannot be reached."},
    {"status", "show a run and its steps", Reach::kAny,
     [](CLI::App& v, Args& a) { RunAndJson(v, a, "print one JSON object"); },
     Connected([](Client& c, Args& a) { return ShowStatus(c, a.run_id, a.json_out); }),
     "  deployctl status demo-3\n"
     "  deployctl status demo-3 --json | jq '.steps[] | {id, state}'",
     "Exit status: 0 the run succeeded or is still going, 1 it failed or was cancelled,\n"
     "2 no such run, 3 deployd cannot be reached."},
    {"show", "show a run's record: its plan, who applied it, its vars; --plan: the plan's text",
     Reach::kAny,
     [](CLI::App& v, Args& a) {
       RunArg(v, a);
       v.add_flag("--plan", a.show_plan, "then print the plan's text exactly as it was applied");
       JsonFlag(v, a, "print one JSON object (with --plan, its \"plan_text\" too)");
     },
     Connected([](Client& c, Args& a) { return ShowRun(c, a.run_id, a.show_plan, a.json_out); }),
     "  deployctl show demo-3\n"
     "  deployctl show demo-3 --plan\n"
     "  deployctl show demo-3 --plan --json | jq -r .plan_text > demo-3.yaml",
     "Exit status: 0, 2 no such run, 3 deployd cannot be reached."},
    {"watch", "show a run live until it ends", Reach::kAny,
     [](CLI::App& v, Args& a) {
       RunAndJson(v, a, "print the follow stream: one JSON object per line");
     },
     Connected(RunWatch),
     "  deployctl watch demo-3\n"
     "  deployctl watch demo-3 > watch.log     (plain lines, one per transition)",
     "Exit status: 0 the run succeeded, 1 it failed or was cancelled, 2 no such run,\n"
     "3 deployd cannot be reached."},
    {"logs", "print the output of a run's steps", Reach::kAny,
     [](CLI::App& v, Args& a) {
       RunArg(v, a);
       StepArg(v, a, "only this step's output (needed with -f)");
       v.add_flag("-f,--follow", a.follow,
                  "print STEP's output as it grows, until the step has ended");
       v.add_flag("-t,--timestamps", a.timestamps,
                  "begin each line with the time it was written (RFC 3339, local time, ms)");
       JsonFlag(v, a, "print JSON (with -f: the stream, one object per line)");
     },
     Connected(RunLogs),
     "  deployctl logs demo-3\n"
     "  deployctl logs demo-3 launch -f\n"
     "  deployctl logs demo-3 download --timestamps",
     "Exit status: 0, 2 no such run or step, 3 deployd cannot be reached."},
    {"why", "show the evidence of a failed run", Reach::kAny,
     [](CLI::App& v, Args& a) { RunAndJson(v, a, "print one JSON object"); }, Connected(RunWhy),
     "  deployctl why demo-3",
     "Exit status: 0 the run did not fail, 1 it failed or was cancelled, 2 no such run,\n"
     "3 deployd cannot be reached."},
    {"cancel", "stop a run: its running step and all after it", Reach::kAny,
     [](CLI::App& v, Args& a) { RunAndJson(v, a, kDoneJson); }, Steer("cancel"),
     "  deployctl cancel demo-3",
     "Exit status: 0 cancelled, 2 refused (the run has finished), 3 deployd cannot be reached."},
    {"retry", "run a failed or cancelled run again from a step", Reach::kAny,
     [](CLI::App& v, Args& a) {
       RunArg(v, a);
       StepArg(v, a, "the step to start from (default: the step that failed)");
       v.add_flag("--wait", a.wait, "show progress until the run ends");
       JsonFlag(v, a, kDoneWithStepJson);
     },
     Connected(RunRetry),
     "  deployctl retry demo-3 --wait\n"
     "  deployctl retry demo-3 download",
     "Exit status: 0 resumed (--wait: succeeded), 1 --wait: the run failed, 2 refused,\n"
     "3 deployd cannot be reached."},
    {"skip", "mark a step skipped and let its run go on", Reach::kAny,
     [](CLI::App& v, Args& a) {
       RunArg(v, a);
       RequiredStepArg(v, a, "the step to mark skipped");
       v.add_flag("--wait", a.wait, "show progress until the run ends");
       JsonFlag(v, a, kDoneWithStepJson);
     },
     Steer("skip"), "  deployctl skip demo-3 smoke-test --wait",
     "Exit status: 0 done (--wait: the run succeeded), 1 --wait: it failed, 2 refused,\n"
     "3 deployd cannot be reached."},
    {"pause", "start no new step until resumed", Reach::kAny,
     [](CLI::App& v, Args& a) { RunAndJson(v, a, kDoneJson); }, Steer("pause"),
     "  deployctl pause demo-3; deployctl resume demo-3",
     "Exit status: 0 paused, 2 refused (not running), 3 deployd cannot be reached."},
    {"resume", "let a paused run go on", Reach::kAny,
     [](CLI::App& v, Args& a) { RunAndJson(v, a, kDoneJson); }, Steer("resume"),
     "  deployctl resume demo-3",
     "Exit status: 0 resumed, 2 refused (not paused), 3 deployd cannot be reached."},
    {"approve", "let an approval step that is waiting go on", Reach::kAny,
     [](CLI::App& v, Args& a) {
       RunArg(v, a);
       RequiredStepArg(v, a, "the approval step that is waiting");
       JsonFlag(v, a, "print {\"op\", \"run\", \"step\", \"state\"}");
     },
     Steer("approve"), "  deployctl approve kimi-1 confirm-traffic-drained",
     "Exit status: 0 approved, 2 refused (the step is not waiting), 3 deployd cannot be "
     "reached."},
    {"delete", "forget a finished run: its record, events and logs", Reach::kAny,
     [](CLI::App& v, Args& a) { RunAndJson(v, a, "print {\"op\", \"deleted\", \"count\"}"); },
     Connected([](Client& c, Args& a) { return DeleteRun(c, a.run_id, a.json_out); }),
     "  deployctl delete demo-3",
     "Exit status: 0 deleted, 2 refused (no such run, or it has not finished), 3 deployd\n"
     "cannot be reached."},
    {"prune", "forget the runs that finished longer ago than a duration, as retention does",
     Reach::kAny,
     [](CLI::App& v, Args& a) {
       v.add_option("--older-than", a.older_than,
                    "the runs that finished longer ago than this duration (e.g. 30d, 12h)")
           ->required()
           ->type_name("DURATION");
       JsonFlag(v, a, "print {\"op\", \"older_than\", \"deleted\", \"count\"}");
     },
     RunPrune,
     "  deployctl prune --older-than 30d\n"
     "  deployctl prune --older-than 7d --json | jq -r '.deleted[]'",
     "Exit status: 0 (also when no run was old enough), 2 a bad duration, 3 deployd cannot be\n"
     "reached."},
    {"dial-stdio", "join stdin and stdout to deployd's socket (what --host runs on the host)",
     Reach::kLocal, [](CLI::App&, Args&) {}, [](Args& a) { return DialStdio(a.Socket()); },
     "  ssh root@gpu7 deployctl dial-stdio     (what deployctl --host ssh://root@gpu7 runs)",
     "Exit status: 0 deployd closed the connection, 3 it cannot be reached."},
    {"rollout", "apply a plan across the hosts of an Ansible inventory, in batches, over ssh",
     Reach::kAny,
     [](CLI::App& v, Args& a) {
       RolloutOptions& o = a.rollout;
       v.add_option("PLAN", o.plan, "the plan file")->required();
       v.add_option("-i,--inventory", o.inventory, "Ansible inventory (INI or YAML)")->required();
       v.add_option("-l,--limit", o.limit, "only these hosts: an Ansible host pattern");
       v.add_option("--serial", o.serial,
                    "batch size, N or N% of the hosts; repeated: the sizes in turn, the last "
                    "one repeating (default: all at once)");
       v.add_option("--max-fail", o.max_fail,
                    "failed hosts a batch may have before the rollout stops, K or K% "
                    "(default 0)");
       VarOption(v, o.vars, "NAME=VALUE override, for every host");
       v.add_option("--unreachable-after", o.unreachable_after,
                    "how long a host may stay unreachable before it counts as failed "
                    "(default 10m)");
       v.add_flag("--wait", o.wait, "show the hosts live until the rollout ends");
       JsonFlag(v, a, "print {\"run\", \"plan_file\", \"inventory\", \"max_fail\", \"batches\"}");
     },
     RunRollout, "  deployctl rollout plans/kimi.yaml -i hosts.ini --serial 1 --serial 25% --wait",
     "Exit status: 0 started (--wait: every host succeeded), 1 --wait: the rollout failed,\n"
     "2 bad usage or an invalid inventory or plan, 3 deployd cannot be reached."},
    {"rollout-batch", "drive one batch of a rollout (what a rollout's steps run)", Reach::kLocal,
     [](CLI::App& v, Args& a) {
       v.add_option("--key", a.key, "the rollout's key")->required();
       v.add_option("--batch", a.batch, "the batch, from 1, or all (the verdict)")->required();
     },
     [](Args& a) { return RolloutBatch(a.Socket(), a.key, a.batch); },
     "  (run by a rollout's steps, not by hand)",
     "Exit status: 0 the batch succeeded, 1 more hosts failed than --max-fail allows."},
    {"history", "what a plan's runs measured (version, tokens/s, TTFT), newest first", Reach::kAny,
     [](CLI::App& v, Args& a) {
       v.add_option("PLAN_NAME", a.plan_name, "the plan's name (its name:, not its file)")
           ->required();
       v.add_option("--limit", a.limit, "at most this many runs (default 20; 0: all)")
           ->check(CLI::NonNegativeNumber);
       JsonFlag(v, a, "print one JSON object");
     },
     Connected([](Client& c, Args& a) { return History(c, a.plan_name, a.limit, a.json_out); }),
     "  deployctl history kimi-k2.5-nvfp4 --limit 5",
     "Exit status: 0, 3 deployd cannot be reached."},
    {"metrics",
     "what deployd exports to Prometheus, in its text format (runs, failures, step durations, "
     "benchmarks, deployd itself)",
     Reach::kAny,
     [](CLI::App& v, Args& a) { JsonFlag(v, a, "print the metric families as one JSON array"); },
     Connected([](Client& c, Args& a) { return Metrics(c, a.json_out); }),
     "  deployctl metrics\n"
     "  deployctl metrics | grep '^deployd_runs_active'",
     "Exit status: 0, or 3 when deployd cannot be reached."},
    {"version", "deployctl's version and protocol, and those of the deployd it reaches",
     Reach::kAny,
     [](CLI::App& v, Args& a) {
       JsonFlag(v, a,
                "print {\"client\", \"daemon\"} (daemon null, and \"daemon_error\", when "
                "it cannot be reached)");
     },
     [](Args& a) { return Version([&a] { return Connect(a); }, a.json_out); },
     "  deployctl version\n"
     "  deployctl --host ssh://root@gpu7 version",
     "Exit status: 0, or 3 when deployd cannot be reached (the client's version is printed\n"
     "all the same)."},
};

constexpr const char* kTopFooter =
    "Global options may come anywhere on the line, before or after the command.\n"
    "`deployctl COMMAND --help` shows a command's arguments and examples.\n"
    "\n"
    "Examples:\n"
    "  deployctl validate plans/demo.yaml\n"
    "  deployctl apply plans/demo.yaml --var dir=/srv/demo --wait\n"
    "  deployctl runs\n"
    "  deployctl why demo-3; deployctl retry demo-3 --wait\n"
    "  deployctl --host ssh://root@gpu7 status kimi-1\n"
    "\n"
    "Exit status:\n"
    "  0  success (apply --wait, retry --wait, skip --wait, watch, status: the run succeeded\n"
    "     or, for status, is still going)\n"
    "  1  the run failed or was cancelled; for plan, a preflight check fails now\n"
    "  2  bad usage, an invalid plan, or a request deployd refused (an unknown run, ...)\n"
    "  3  deployd cannot be reached (not running, the wrong socket, this user not allowed)\n";

// The help a usage error points to: the verb's, when one was chosen.
std::string HelpHint(CLI::App& app) {
  std::vector<CLI::App*> chosen = app.get_subcommands();
  std::string verb = chosen.empty() ? "" : chosen.front()->get_name() + " ";
  return " (`deployctl " + verb + "--help` shows how it is used)";
}

// The command of the line before CLI11 reads it, so that a word that names no command is
// refused as one ("unknown command"), not as a missing command; "" when there is none.
std::string CommandWord(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "--") return i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--socket" || arg == "--host" || arg == "--config") {
      ++i;  // its value
    } else if (!arg.starts_with("-")) {
      return std::string(arg);
    }
  }
  return "";
}

bool AsksForHelpOrVersion(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    if (arg == "-h" || arg == "--help" || arg == "--version") return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"deployctl: control deployd, the deployment daemon", "deployctl"};
  app.fallthrough();  // the verbs inherit it: a global option after the verb is the app's
  Args args;
  app.add_option("--socket", args.socket_flag,
                 std::string("deployd's socket (default: $DEPLOYD_SOCKET, else the socket: of "
                             "--config, else ") +
                     kSystemSocketPath + " where this user may use it, else " + UserSocketPath() +
                     ")");
  app.add_option("--config", args.config_flag,
                 std::string("deployd's configuration file, read for its socket: (default: ") +
                     kSystemConfigPath + " where this user may read it)");
  app.add_option("--host", args.host,
                 "reach deployd on another host through ssh: ssh://[USER@]HOST[:PORT] "
                 "(default: $DEPLOYD_HOST; --socket then names the socket there)");
  app.set_version_flag("--version", std::string("deployctl ") + DEPLOYD_VERSION);
  std::vector<std::string> names;
  std::map<const CLI::App*, const Verb*> verb_of;
  for (const Verb& verb : kVerbs) {
    CLI::App* v = app.add_subcommand(verb.name, verb.summary);
    verb.define(*v, args);
    v->footer(std::string("Examples:\n") + verb.examples + "\n\n" + verb.exit_status +
              "\n\nGlobal options (--socket, --host, --config) may come anywhere: see `deployctl "
              "--help`.");
    verb_of[v] = &verb;
    names.emplace_back(verb.name);
  }
  app.footer(kTopFooter);

  std::string word = CommandWord(argc, argv);
  if (word.empty() && !AsksForHelpOrVersion(argc, argv)) {
    std::cerr << app.help();
    return kExitUsage;
  }
  if (!word.empty() && std::find(names.begin(), names.end(), word) == names.end()) {
    std::string suggestion = DidYouMean(word, names);
    std::cerr << "deployctl: error: unknown command '" << word << "' ("
              << (suggestion.empty() ? "`deployctl --help` lists the commands"
                                     : "did you mean " + suggestion + "?")
              << ")\n";
    return kExitUsage;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    std::cerr << "deployctl: error: " << e.what() << HelpHint(app) << "\n";
    return kExitUsage;
  }

  std::vector<CLI::App*> chosen = app.get_subcommands();
  const Verb& verb = *verb_of.at(chosen.front());
  try {
    // A rollout's step talks to its own coordinator, whatever DEPLOYD_HOST it inherited.
    if (verb.reach == Reach::kAny) ChooseRemoteHost(args.host, args.socket_flag);
    return verb.run(args);
  } catch (const Exit& e) {
    if (!e.message.empty()) std::cerr << "deployctl: error: " << e.message << "\n";
    return e.code;
  }
}
