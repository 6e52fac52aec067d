// The `benchmark` check's grammar: the server and the load (url, model, api, prompts or
// prompt_tokens, max_tokens, requests, concurrency, stream, ignore_eos), the bounds (at_least,
// at_most, regression) and the quality smoke (expect). Problems go to the FieldReader. Where a
// benchmark may stand (a step's verify, once) is check_grammar.h's to say.
#ifndef DEPLOYD_PLAN_BENCHMARK_GRAMMAR_H_
#define DEPLOYD_PLAN_BENCHMARK_GRAMMAR_H_

#include "deployd/plan.h"
#include "plan/field_reader.h"

namespace deployd {

// `e` is the `benchmark:` entry of a check whose kind is already set. Sets the check's default
// timeout (kBenchmarkTimeout), which its own `timeout` then overrides.
void ReadBenchmarkCheck(FieldReader& in, const Field& e, Check& check);

inline constexpr Duration kBenchmarkTimeout = std::chrono::minutes(5);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_BENCHMARK_GRAMMAR_H_
