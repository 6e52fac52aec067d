#include "plan/plan_defaults.h"

#include <algorithm>
#include <string_view>

#include "plan/fail_on_sets.h"

namespace deployd {
namespace {

// A download that makes no progress for this long is restarted (downloads resume).
constexpr Duration kDownloadStallAfter = std::chrono::minutes(10);
constexpr int kDownloadRetries = 3;

bool HasCommandCheck(const Plan& plan, const std::string& name) {
  return std::any_of(plan.preflight.begin(), plan.preflight.end(), [&](const Check& c) {
    return c.kind == CheckKind::kCommand && c.name == name;
  });
}

void AddImpliedChecks(const Step& step, Plan& plan) {
  Check check;
  check.kind = CheckKind::kCommand;
  check.pos = step.pos;
  if (step.kind == ActionKind::kService && !HasCommandCheck(plan, "systemctl")) {
    check.name = "systemctl";
    plan.preflight.push_back(check);
  }
  if (step.kind != ActionKind::kDownload) return;
  if (!HasCommandCheck(plan, "hf")) {
    check.name = "hf";
    check.alternatives = {"huggingface-cli"};
    plan.preflight.push_back(check);
  }
  bool space_checked = std::any_of(
      plan.preflight.begin(), plan.preflight.end(),
      [&](const Check& c) { return c.kind == CheckKind::kDiskFree && c.path == step.download.to; });
  if (step.download.size && !space_checked) {
    Check space;
    space.kind = CheckKind::kDiskFree;
    space.pos = step.pos;
    space.path = step.download.to;
    space.at_least = *step.download.size;
    space.credit_existing = true;
    plan.preflight.push_back(space);
  }
}

}  // namespace

int DefaultRetries(ActionKind kind) { return kind == ActionKind::kDownload ? kDownloadRetries : 0; }

void ApplyDownloadDefaults(bool plan_sets_on_stall, const std::set<std::string>& plan_secrets,
                           Step& step) {
  step.background = true;
  step.idempotent = true;
  if (!step.watch.progress) {
    ProgressSpec spec;
    spec.path = step.download.to;
    spec.stall_after = kDownloadStallAfter;
    spec.total = step.download.size;
    spec.pos = step.pos;
    step.watch.progress = spec;
  }
  if (!plan_sets_on_stall && step.retries > 0) step.watch.on_stall = OnStall::kRestart;
  AddFailOnSet("hf", step.pos, step.watch);
  if (std::none_of(step.secrets.begin(), step.secrets.end(),
                   [](const std::string& n) { return n == "HF_TOKEN"; }) &&
      plan_secrets.contains("HF_TOKEN"))
    step.secrets.push_back("HF_TOKEN");
}

void AddUnitExitPatterns(Step& step) {
  if (step.kind != ActionKind::kService ||
      (step.service.state != "started" && step.service.state != "restarted"))
    return;
  std::string unit;
  for (char c : step.service.unit) {
    if (std::string_view(".\\^$|?*+()[]{}").find(c) != std::string_view::npos) unit += '\\';
    unit += c;
  }
  FailPattern exited;
  exited.pattern = "^" + unit + ": Main process exited, code=(killed|dumped|exited, status=[1-9])";
  exited.pos = step.pos;
  exited.explanation = "the server's main process died (the lines before say why)";
  exited.set = "systemd: the unit's main process died";
  step.watch.fail_on.push_back(exited);
  FailPattern limit;
  limit.pattern = "^" + unit + ": Start request repeated too quickly";
  limit.pos = step.pos;
  limit.explanation = "systemd gave up restarting the server (StartLimitBurst)";
  limit.set = "systemd: the unit's main process died";
  step.watch.fail_on.push_back(limit);
}

void AddImpliedPreflight(Plan& plan) {
  for (const auto* list : {&plan.steps, &plan.on_failure}) {
    for (const Step& step : *list) AddImpliedChecks(step, plan);
  }
}

}  // namespace deployd
