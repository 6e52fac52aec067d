// The action grammar: the one key of a step that says what it does (run, approval, service,
// kill, gpus_free, remove, download) and that key's value. Also the pieces the `service` and
// `gpus_free` checks share with their actions: a unit name, a GPU selection. Problems go to the
// FieldReader.
#ifndef DEPLOYD_PLAN_ACTION_GRAMMAR_H_
#define DEPLOYD_PLAN_ACTION_GRAMMAR_H_

#include <optional>
#include <string>

#include "deployd/plan.h"
#include "plan/field_reader.h"

namespace deployd {

// The keys that name an action, in the order messages list them: "run", "approval", ….
Keys ActionKeys();

// Sets step.kind and the action's fields from `e`.
// REQUIRES: e.name is one of ActionKeys().
void ReadAction(FieldReader& in, const Field& e, Step& step);

// `gpus` and `max_used` of a gpus_free action or check.
void ReadGpuSelection(FieldReader& in, const Fields& f, GpuSelection& gpu);

// A systemd unit name: letters, digits, ":-_.\@", with a suffix; ".service" is assumed.
std::optional<std::string> ReadUnitName(FieldReader& in, const Field& e);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_ACTION_GRAMMAR_H_
