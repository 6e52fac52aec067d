// FailOnMatcher: a step's `watch.fail_on` patterns, compiled once when the run is activated,
// and matched against each line of the action's output (its own, a background action's log,
// or a service's journal). The patterns were validated by the parser. Immutable once built.
#ifndef DEPLOYD_ENGINE_FAIL_ON_MATCHER_H_
#define DEPLOYD_ENGINE_FAIL_ON_MATCHER_H_

#include <regex>
#include <string_view>
#include <utility>
#include <vector>

#include "deployd/plan.h"
#include "engine/step_update.h"

namespace deployd {

class FailOnMatcher {
 public:
  FailOnMatcher() = default;
  // REQUIRES: `patterns` outlives the matcher (the run's parsed plan holds them).
  explicit FailOnMatcher(const std::vector<FailPattern>& patterns);

  bool empty() const { return compiled_.empty(); }
  // The first pattern the line matches, or nullptr.
  const FailPattern* Match(std::string_view line) const;

 private:
  std::vector<std::pair<const FailPattern*, std::regex>> compiled_;
};

// What a matched line says about the step: the reason (the set's explanation, if any), the
// evidence, and whether retries are pointless (a fatal pattern).
StepEventInfo FailOnEvent(const FailPattern& pattern, std::string_view line);

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_FAIL_ON_MATCHER_H_
