// The limits of what a plan may hold (README, "Limits"; deployd-plan(5), LIMITS), in one place.
// Each bounds the time and the memory one plan can cost the parser — which runs in deployctl,
// and in deployd for `apply`, `plan` and when a run is resumed — whatever its author intended:
// a plan over a limit is refused with a diagnostic, never read further.
//
// The bounds of a pattern (its length, nesting and compiled size) are those of util/pattern.h.
#ifndef DEPLOYD_PLAN_PLAN_LIMITS_H_
#define DEPLOYD_PLAN_PLAN_LIMITS_H_

#include <chrono>
#include <cstddef>

#include "util/pattern.h"

namespace deployd {

// The document. Its JSON form (the `apply` request, at most 4 MiB) stays under the request limit:
// control characters other than tab and line ends are refused, so escaping at most doubles it.
inline constexpr std::size_t kMaxPlanBytes = 1 << 20;
// YAML nodes: every key, value and item; an alias counts the nodes it repeats. yaml-cpp spends
// about 500 bytes of memory a node.
inline constexpr std::size_t kMaxPlanNodes = 50'000;
// Maps and lists inside one another.
inline constexpr int kMaxPlanNesting = 64;
// One scalar: a key or a value (a script written inline, say).
inline constexpr std::size_t kMaxStringBytes = 64 << 10;
// A value read as a number: an integer, a duration, a size, a number of an http `body`.
inline constexpr std::size_t kMaxNumberChars = 64;
// Every duration of a plan: a year. Timers add durations to a clock counted in nanoseconds.
inline constexpr std::chrono::milliseconds kMaxDuration = std::chrono::hours(24 * 365);
// `steps` and `on_failure` together.
inline constexpr std::size_t kMaxSteps = 1000;
// A step's fail_on patterns, a set's counted: they are compiled when the step first prints.
inline constexpr std::size_t kMaxFailOnPatterns = 100;

// What the diagnostics of one plan may cost: this many are reported, then one line says how
// many more there were; a quoted source line is cut to kMaxQuotedSourceBytes around the column,
// a quoted value to kMaxQuotedValueBytes; "did you mean" is tried only for a name of at most
// kMaxSuggestedNameBytes, against at most kMaxSuggestionCandidates names of a close length.
inline constexpr std::size_t kMaxDiagnostics = 100;
inline constexpr std::size_t kMaxQuotedSourceBytes = 160;
inline constexpr std::size_t kMaxQuotedValueBytes = 80;
inline constexpr std::size_t kMaxSuggestedNameBytes = 32;
inline constexpr std::size_t kMaxSuggestionCandidates = 256;

}  // namespace deployd

#endif  // DEPLOYD_PLAN_PLAN_LIMITS_H_
