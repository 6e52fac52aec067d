// The problems the parser finds in a plan, one "LINE:COL: message" line each, for the tests that
// pin the messages of the plan keys (plan_parser_test.cc pins the full format, with the quoted
// line and caret).
#ifndef DEPLOYD_TESTS_PLAN_PROBLEMS_H_
#define DEPLOYD_TESTS_PLAN_PROBLEMS_H_

#include <string>
#include <string_view>

#include "plan/plan_parser.h"

namespace deployd::testing {

inline std::string Problems(std::string_view text) {
  ParseResult result = ParsePlan(text, "plan.yaml", {});
  std::string out;
  for (const Diagnostic& d : result.errors)
    out += std::to_string(d.line) + ":" + std::to_string(d.column) + ": " + d.message + "\n";
  return out;
}

}  // namespace deployd::testing

#endif  // DEPLOYD_TESTS_PLAN_PROBLEMS_H_
