// FailOnMatcher: a step's `watch.fail_on` patterns, compiled into one PatternSet
// (util/pattern.h) at the first line the step prints — not when the run is activated, so that a
// plan of many steps costs the daemon's thread only the steps that run (at most
// kMaxFailOnPatterns each) — and matched against each line of the action's output (its own, a
// background action's log, or a service's journal): a line is scanned once for all the
// patterns, in time linear in its length. The patterns were validated by the parser. One
// thread.
//
// Lines reach it cut at 64 KiB (util/line_splitter.h); a match that would span the cut is not
// seen. A matched line is quoted in the step's reason and evidence cut to kMaxQuotedLine bytes
// around where the pattern matched, so that a long line (a config dump, a JSON blob) does not
// fill the run's record.
#ifndef DEPLOYD_ENGINE_FAIL_ON_MATCHER_H_
#define DEPLOYD_ENGINE_FAIL_ON_MATCHER_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/plan.h"
#include "engine/step_update.h"
#include "util/pattern.h"

namespace deployd {

inline constexpr std::size_t kMaxQuotedLine = 1024;

// A line that matched: the first pattern (in plan order) it matches, and the line as quoted.
struct FailOnHit {
  const FailPattern* pattern = nullptr;
  std::string line;  // valid UTF-8, at most kMaxQuotedLine bytes
};

class FailOnMatcher {
 public:
  FailOnMatcher() = default;
  // REQUIRES: `patterns` outlives the matcher (the run's parsed plan holds them), and they
  // compile (the parser has checked them).
  explicit FailOnMatcher(const std::vector<FailPattern>& patterns);
  // Only those of `patterns` meant for the kernel's log (FailPattern::kernel).
  static FailOnMatcher ForKernel(const std::vector<FailPattern>& patterns);

  bool empty() const { return patterns_.empty(); }
  std::optional<FailOnHit> Match(std::string_view line);

 private:
  std::vector<const FailPattern*> patterns_;
  std::optional<PatternSet> set_;  // compiled at the first line
};

// What a matched line says about the step: the reason (the set's explanation, if any), the
// evidence, and whether retries are pointless (a fatal pattern).
StepEventInfo FailOnEvent(const FailPattern& pattern, std::string_view line);
// The same for a line of the kernel's log: the reason quotes it as "kernel: LINE", the
// evidence says "from": "kernel".
StepEventInfo KernelFailOnEvent(const FailPattern& pattern, std::string_view line);

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_FAIL_ON_MATCHER_H_
