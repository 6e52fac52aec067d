// PlanParser: plan text (YAML, format v1) → a validated Plan, or every problem found.
//
// Parsing never stops at the first problem: each one is a Diagnostic, and the whole list is
// reported. A plan with any diagnostic produces no Plan, so nothing runs.
#ifndef DEPLOYD_PLAN_PLAN_PARSER_H_
#define DEPLOYD_PLAN_PLAN_PARSER_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/plan.h"
#include "plan/diagnostic.h"

namespace deployd {

struct ParseResult {
  std::optional<Plan> plan;  // set iff errors is empty
  std::vector<Diagnostic> errors;
};

// `file_name` is used only in diagnostics. `overrides` are --var K=V values; each must name a
// variable the plan declares under `vars:`.
ParseResult ParsePlan(std::string_view text, std::string_view file_name,
                      const std::map<std::string, std::string>& overrides);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_PLAN_PARSER_H_
