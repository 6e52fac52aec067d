#include "actions/builtin_action.h"

#include <boost/json.hpp>
#include <cstdio>
#include <cstdlib>

#include "actions/builtin_json.h"
#include "actions/download_action.h"
#include "actions/gpu/gpus_free_action.h"
#include "actions/kill_action.h"
#include "actions/process_probe.h"
#include "actions/remove_action.h"
#include "actions/service/service_action.h"
#include "actions/service/service_probe.h"
#include "checks/checks.h"
#include "checks/weights_check.h"
#include "util/secrets.h"

namespace deployd {

namespace {

void WriteLine(std::string_view line) {
  std::fwrite(line.data(), 1, line.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);  // the step's log and fail_on see each line as it is said
}

Status RunAction(const BuiltinRequest& q, const ActionContext& ctx) {
  switch (q.kind) {
    case ActionKind::kService:
      return RunServiceAction(q.service, ctx);
    case ActionKind::kKill:
      return RunKillAction(q.kill, ctx);
    case ActionKind::kGpusFree:
      return RunGpusFreeAction(q.gpus_free, ctx);
    case ActionKind::kRemove:
      return RunRemoveAction(q.remove, ctx);
    case ActionKind::kDownload:
      return RunDownloadAction(q.download, ctx);
    case ActionKind::kRun:
    case ActionKind::kApproval:
      break;
  }
  return Status::Error("not a built-in action");
}

CheckOutcome Probe(const Check& check) {
  switch (check.kind) {
    case CheckKind::kService:
      return ProbeService(check);
    case CheckKind::kProcess:
      return ProbeProcess(check);
    case CheckKind::kGpusFree:
      return ProbeGpusFree(check);
    case CheckKind::kWeightsComplete: {
      WeightsCheckOptions options;
      options.sha256 = check.sha256;
      // This is the probe child, not the daemon: hashing may take threads of its own.
      options.parallel_hashes = HashParallelism();
      Result<WeightsCheckOutcome> result = CheckWeightsComplete(check.path, options);
      CheckOutcome outcome;
      if (!result.ok()) {
        outcome.summary = "weights_complete " + check.path + ": " + result.status().message();
        outcome.evidence["error"] = result.status().message();
        return outcome;
      }
      outcome.passed = result->passed;
      // The library's summary reads "weights DIR: …"; a check's names its kind.
      std::string prefix = "weights " + check.path + ": ";
      outcome.summary = result->summary.rfind(prefix, 0) == 0
                            ? "weights_complete " + result->summary.substr(8)
                            : result->summary;
      outcome.evidence = std::move(result->evidence);
      return outcome;
    }
    default:
      break;
  }
  CheckOutcome outcome;
  outcome.summary = "this check does not run as a probe child";
  return outcome;
}

}  // namespace

int BuiltinActionMain(std::string_view request) {
  Result<BuiltinRequest> q = ParseActionRequest(request);
  if (!q.ok()) {
    WriteLine(q.status().message());
    return 2;
  }
  // The secrets this action was given are in its environment; none may reach the log.
  std::vector<std::string> values;
  for (const std::string& name : q->secrets)
    if (const char* value = std::getenv(name.c_str())) values.emplace_back(value);
  Redactor redactor(values);
  ActionContext ctx = q->context;
  ctx.say = [&redactor](std::string_view line) {
    WriteLine(redactor.empty() ? std::string(line) : redactor.Redact(line));
  };
  Status status = RunAction(q.value(), ctx);
  if (status.ok()) return 0;
  ctx.say(status.message());  // the last line: the step's reason (builtin_action.h)
  return 1;
}

int BuiltinProbeMain(std::string_view request) {
  Result<Check> check = ParseProbeRequest(request);
  CheckOutcome outcome;
  if (check.ok()) {
    outcome = Probe(check.value());
  } else {
    outcome.summary = check.status().message();
  }
  boost::json::object line{
      {"passed", outcome.passed}, {"summary", outcome.summary}, {"evidence", outcome.evidence}};
  WriteLine(boost::json::serialize(line));
  return outcome.passed ? 0 : 1;
}

}  // namespace deployd
