// PlanParser: plan text (YAML, format v1) → a validated Plan, or every problem found.
//
// Parsing never stops at the first problem: each one is a Diagnostic, and the whole list is
// reported. A plan with any diagnostic produces no Plan, so nothing runs.
#ifndef DEPLOYD_PLAN_PARSER_H_
#define DEPLOYD_PLAN_PARSER_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/plan.h"

namespace deployd {

struct Diagnostic {
  std::string file;
  int line = 0;    // 1-based; 0 when the problem has no position (e.g. a --var)
  int column = 0;  // 1-based
  std::string message;
  std::string source_line;  // the quoted line, without its newline

  // "FILE:LINE:COL: error: MESSAGE\nSOURCE_LINE\n    ^" (no trailing newline); without a
  // position: "FILE: error: MESSAGE".
  std::string Format() const;
};

struct ParseResult {
  std::optional<Plan> plan;  // set iff errors is empty
  std::vector<Diagnostic> errors;
};

// `file_name` is used only in diagnostics. `overrides` are --var K=V values; each must name a
// variable the plan declares under `vars:`.
ParseResult ParsePlan(std::string_view text, std::string_view file_name,
                      const std::map<std::string, std::string>& overrides);

// Durations: an integer with a unit, or several ("500ms", "15s", "10m", "8h", "1h30m").
std::optional<Duration> ParseDuration(std::string_view text);
// Sizes: an integer with an optional unit: B, kB/KB, MB, GB, TB (powers of 1000),
// KiB, MiB, GiB, TiB (powers of 1024). A bare integer is bytes.
std::optional<std::uint64_t> ParseSize(std::string_view text);
// "1.5s", "250ms", "2m03s" — the inverse of ParseDuration, for messages.
std::string FormatDuration(Duration d);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_PARSER_H_
