// The plan parser on any text, as `deployctl validate` and the daemon's `apply` read a plan:
// ParsePlan, then every diagnostic formatted as it is printed. Of a plan that parses, each
// built-in action is described as `deployctl plan` shows it and encoded as the `deployd
// --action` request of its child, and each check probed in a child as its `deployd --probe`
// request; the child must read back what the daemon wrote (else abort, a finding).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "actions/builtin_json.h"
#include "checks/probe_request.h"
#include "plan/plan_parser.h"

using namespace deployd;

namespace {

bool InChild(CheckKind kind) {
  return kind == CheckKind::kService || kind == CheckKind::kProcess ||
         kind == CheckKind::kGpusFree || kind == CheckKind::kWeightsComplete;
}

void CheckRequests(const Step& step) {
  if (step.kind != ActionKind::kRun && step.kind != ActionKind::kApproval) {
    (void)DescribeAction(step);
    if (!ParseActionRequest(ActionRequestJson(step, ActionContext{})).ok()) std::abort();
  }
  for (const auto* checks : {&step.verify, &step.skip_if})
    for (const Check& check : *checks)
      if (InChild(check.kind) && !ParseProbeRequest(ProbeRequestJson(check)).ok()) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ParseResult parsed = ParsePlan(text, "fuzz.yaml", {});
  for (const Diagnostic& d : parsed.errors) (void)d.Format();
  if (!parsed.plan) return 0;
  for (const Check& check : parsed.plan->preflight)
    if (InChild(check.kind) && !ParseProbeRequest(ProbeRequestJson(check)).ok()) std::abort();
  for (const Step& step : parsed.plan->steps) CheckRequests(step);
  for (const Step& step : parsed.plan->on_failure) CheckRequests(step);
  return 0;
}
