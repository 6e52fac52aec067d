// Plan defaults: the policy the parser applies on top of what a plan says, so that a short plan
// does the safe thing — a download is retried, watched and restarted when it stalls; a service
// that dies while it is verified fails its step at once; a built-in action's tool and a
// download's disk space are checked in preflight. Functions over the parsed Step or Plan; they
// report nothing (the plan's own keys were checked already) and only add to what the plan says.
#ifndef DEPLOYD_PLAN_PLAN_DEFAULTS_H_
#define DEPLOYD_PLAN_PLAN_DEFAULTS_H_

#include <set>
#include <string>

#include "deployd/plan.h"

namespace deployd {

// The retries a step of `kind` has when the plan gives none: a download is retried (hf
// resumes), the others are not.
int DefaultRetries(ActionKind kind);

// A download runs in the background, is watched by the bytes under its destination, and is
// restarted when they stop growing (hf resumes); the errors no retry fixes fail it at once. It
// gets the plan's HF_TOKEN secret when the plan defines one. The plan's own watch keys win:
// `plan_sets_on_stall` says whether its `watch:` has `on_stall`.
// REQUIRES: step.kind == ActionKind::kDownload, its watch and retries read.
void ApplyDownloadDefaults(bool plan_sets_on_stall, const std::set<std::string>& plan_secrets,
                           Step& step);

// A server that dies while it is being verified is noticed from systemd's own journal line at
// once, not when the readiness check runs out. Adds to a service step that starts its unit
// (state started or restarted); other steps are left as they are.
void AddUnitExitPatterns(Step& step);

// What a built-in action needs before anything is changed: its tool on PATH, and for a download
// of known size the space for it — unless the plan's preflight checks it already. Checked in
// preflight, so a missing `hf` fails the run before the old server is stopped.
void AddImpliedPreflight(Plan& plan);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_PLAN_DEFAULTS_H_
