// Named sets of fail_on patterns: `fail_on: vllm` stands for the fatal startup and runtime
// signatures of vLLM (notes: failure modes #15, #17, #25), and `fail_on: hf` for the
// Hugging Face download errors that no retry can fix (#7, #8). Each pattern carries the one-line
// explanation a step's failure reason gives after the matched line.
#ifndef DEPLOYD_PLAN_FAIL_ON_SETS_H_
#define DEPLOYD_PLAN_FAIL_ON_SETS_H_

#include <cstdint>
#include <span>
#include <string_view>

#include "deployd/plan.h"

namespace deployd {

struct NamedPattern {
  std::string_view pattern;      // RE2 syntax, as a plan's fail_on would spell it
  std::string_view explanation;  // what the line means and what to do
  bool retryable = false;        // a fresh attempt may succeed (else retries are skipped)
  bool kernel = false;           // a line of the kernel's log, not of the server (FailPattern)
};

// The set called `name`, or an empty span when there is none.
std::span<const NamedPattern> FailOnSet(std::string_view name);
// The size of the set's patterns compiled (util/pattern.h), measured once.
std::int64_t FailOnSetInstructions(std::string_view name);

// Appends the set's patterns to `watch.fail_on` as `fail_on: NAME` gives them: each written at
// `pos`, fatal unless a retry may succeed, naming its set, and marked when the kernel's log is
// where its lines appear.
void AddFailOnSet(std::string_view name, SourcePos pos, Watch& watch);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_FAIL_ON_SETS_H_
