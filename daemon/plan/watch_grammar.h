// The watch grammar: a step's `watch:` map — `fail_on` (patterns, or a named set such as `vllm`,
// see fail_on_sets.h), `progress` (what must keep growing) and `on_stall` (fail or restart).
// Problems go to the FieldReader.
#ifndef DEPLOYD_PLAN_WATCH_GRAMMAR_H_
#define DEPLOYD_PLAN_WATCH_GRAMMAR_H_

#include "deployd/plan.h"
#include "plan/field_reader.h"

namespace deployd {

// `has_retries`: the step may be fired again, which `on_stall: restart` needs.
Watch ReadWatch(FieldReader& in, const Field& e, bool has_retries);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_WATCH_GRAMMAR_H_
