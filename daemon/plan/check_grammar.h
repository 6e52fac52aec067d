// The check grammar: the lists under `preflight:`, a step's `verify:` and `skip_if:`. A check is
// a map with exactly one kind key (run, http, tcp, …, version) and the timing keys every kind
// shares (after, every, within, timeout). Problems go to the FieldReader; a check with problems
// is still returned, so that the rest of the plan is read.
#ifndef DEPLOYD_PLAN_CHECK_GRAMMAR_H_
#define DEPLOYD_PLAN_CHECK_GRAMMAR_H_

#include <vector>

#include "deployd/plan.h"
#include "plan/field_reader.h"

namespace deployd {

// `e` is the list (`preflight: [...]`); null is no checks.
std::vector<Check> ReadChecks(FieldReader& in, const Field& e);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_CHECK_GRAMMAR_H_
