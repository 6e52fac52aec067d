#include "control/plan_preview.h"

#include <boost/json.hpp>

#include "actions/builtin_json.h"
#include "checks/checks.h"
#include "control/plan_parsing.h"
#include "plan/plan_parser.h"

namespace deployd {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

json::value OptionalMs(const std::optional<Duration>& d) {
  return d ? json::value(d->count()) : json::value(nullptr);
}

json::object CheckToJson(const Check& check) {
  return {{"check", DescribeCheck(check)},
          {"after_ms", check.after.count()},
          {"every_ms", check.every.count()},
          {"within_ms", OptionalMs(check.within)},
          {"timeout_ms", check.timeout.count()}};
}

// Each check once; `all_passed` is false when one fails.
asio::awaitable<json::array> ProbeAll(const std::vector<Check>& checks, bool& all_passed) {
  json::array out;
  all_passed = true;
  for (const Check& check : checks) {
    CheckOutcome outcome = co_await ProbeOnce(check);
    json::object o = CheckToJson(check);
    o["passed"] = outcome.passed;
    o["summary"] = outcome.summary;
    all_passed = all_passed && outcome.passed;
    out.push_back(std::move(o));
  }
  co_return out;
}

asio::awaitable<json::object> StepToJson(const Step& step) {
  json::object o;
  o["id"] = step.id;
  o["action"] = ToString(step.kind);
  if (step.approval) {
    o["approval"] = *step.approval;
  } else if (step.kind != ActionKind::kRun) {
    o["description"] = DescribeAction(step);
  } else {
    json::object command;
    command["shell"] = step.run.shell;
    if (step.run.shell) command["script"] = step.run.script;
    json::array argv;
    for (const std::string& a : step.run.Argv()) argv.emplace_back(a);
    command["argv"] = std::move(argv);
    o["command"] = std::move(command);
  }
  o["background"] = step.background;
  o["timeout_ms"] = OptionalMs(step.timeout);
  o["grace_ms"] = step.grace.count();
  o["retries"] = step.retries;
  o["retry_delay_ms"] = step.retry_delay.count();
  o["idempotent"] = step.idempotent;
  o["cwd"] = step.cwd;
  json::object env;
  for (const auto& [k, v] : step.env) env[k] = v;
  o["env"] = std::move(env);
  json::array fail_on;
  // A named set is shown by its name, once.
  for (size_t i = 0; i < step.watch.fail_on.size(); ++i) {
    const FailPattern& p = step.watch.fail_on[i];
    if (p.set.empty()) {
      fail_on.emplace_back(p.pattern);
    } else if (i == 0 || step.watch.fail_on[i - 1].set != p.set) {
      fail_on.emplace_back("[" + p.set + "]");
    }
  }
  o["fail_on"] = std::move(fail_on);
  if (const auto& p = step.watch.progress) {
    o["progress"] = {{"path", p->path},
                     {"stall_after_ms", p->stall_after.count()},
                     {"every_ms", p->every.count()},
                     {"total_bytes", p->total ? json::value(*p->total) : json::value(nullptr)},
                     {"on_stall", step.watch.on_stall == OnStall::kRestart ? "restart" : "fail"}};
  }
  json::array verify;
  for (const Check& check : step.verify) verify.push_back(CheckToJson(check));
  o["verify"] = std::move(verify);
  bool all_passed = true;
  o["skip_if"] = co_await ProbeAll(step.skip_if, all_passed);
  o["would_skip"] = !step.skip_if.empty() && all_passed;
  co_return o;
}

}  // namespace

asio::awaitable<json::object> PreviewPlan(std::string text, std::string file,
                                          std::map<std::string, std::string> vars) {
  ParseResult parsed = co_await ParsePlanAside(text, file, vars);
  if (!parsed.plan) {
    json::array diagnostics;
    for (const Diagnostic& d : parsed.errors) diagnostics.emplace_back(d.Format());
    co_return json::object{
        {"ok", false}, {"error", "invalid plan " + file}, {"diagnostics", std::move(diagnostics)}};
  }
  const Plan& plan = *parsed.plan;
  json::object o;
  o["name"] = plan.name;
  o["description"] = plan.description;
  o["file"] = file;
  json::object vars_json;
  for (const auto& [k, v] : plan.vars) vars_json[k] = v;
  o["vars"] = std::move(vars_json);
  bool preflight_passed = true;
  o["preflight"] = co_await ProbeAll(plan.preflight, preflight_passed);
  o["preflight_passed"] = preflight_passed;
  json::array steps;
  for (const Step& step : plan.steps) steps.push_back(co_await StepToJson(step));
  o["steps"] = std::move(steps);
  json::array on_failure;
  for (const Step& step : plan.on_failure) on_failure.push_back(co_await StepToJson(step));
  o["on_failure"] = std::move(on_failure);
  co_return json::object{{"ok", true}, {"plan", std::move(o)}};
}

}  // namespace deployd
