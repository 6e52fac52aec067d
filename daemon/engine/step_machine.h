// StepMachine: the pure state machine of one step (DESIGN.md §1 "Fire and verify").
//
// NextState(state, facts, event) → the next state and the effects the run manager must carry
// out, in order. No I/O, no clock, no randomness: every (state × event) pair is covered by a
// table test. A pair that makes no sense (a stale event from an earlier attempt, a verify result
// for a step that is not verifying) is `valid == false` and changes nothing.
#ifndef DEPLOYD_ENGINE_STEP_MACHINE_H_
#define DEPLOYD_ENGINE_STEP_MACHINE_H_

#include <string_view>
#include <vector>

#include "deployd/states.h"

namespace deployd {

// What the machine must know about the step besides its state.
struct StepFacts {
  bool has_skip_if = false;
  bool has_verify = false;
  bool background = false;
  bool idempotent = false;
  // The action is an operator's approval, not a command: "firing" it makes the step wait, and
  // there is no process to stop. Asking again is always safe.
  bool approval = false;
  int attempts = 0;         // attempts fired so far
  int max_attempts = 1;     // retries + 1
  bool recovering = false;  // re-verifying after a daemon restart interrupted the step
  // After a restart: the attempt's action provably never started (no record of its
  // supervisor, in this boot), so firing it is not a repeat.
  bool never_started = false;
  bool restart_on_stall = false;  // watch.on_stall: restart (else a stall fails at once)
  // A foreground action whose output is still followed while the step verifies (a service
  // step's journal): a fail_on line then fails the step as a background action's exit does.
  bool follows_output = false;
};

enum class StepEvent {
  kStart,            // the scheduler reached this step
  kSkipMatched,      // every skip_if check passed
  kSkipNotMatched,   // some skip_if check failed
  kActionSucceeded,  // foreground action exited 0
  kActionStarted,    // background action was started
  kActionFailed,     // non-zero exit, timeout, fail_on line, cannot start
  kStalled,          // watch.progress saw no progress for stall_after
  kVerifyPassed,
  kVerifyFailed,
  kRetryDue,       // the retry delay has elapsed
  kCancel,         // the run is being cancelled
  kRecover,        // the daemon restarted while the step was running or verifying, and what
                   // became of its attempt is not known (or it never started)
  kReattach,       // the daemon restarted; the attempt's action is still running (its
                   // supervisor is alive), or a background one ended with exit status 0
  kOperatorSkip,   // deployctl skip
  kOperatorRetry,  // deployctl retry (a finished step starts afresh)
  kApprove,        // deployctl approve (an approval step that is waiting goes on)
};
inline constexpr StepEvent kAllStepEvents[] = {
    StepEvent::kStart,           StepEvent::kSkipMatched,   StepEvent::kSkipNotMatched,
    StepEvent::kActionSucceeded, StepEvent::kActionStarted, StepEvent::kActionFailed,
    StepEvent::kStalled,         StepEvent::kVerifyPassed,  StepEvent::kVerifyFailed,
    StepEvent::kRetryDue,        StepEvent::kCancel,        StepEvent::kRecover,
    StepEvent::kReattach,        StepEvent::kOperatorSkip,  StepEvent::kOperatorRetry,
    StepEvent::kApprove};

enum class StepEffect {
  kEvaluateSkip,   // run the skip_if checks
  kFire,           // start a new attempt of the action (attempts + 1)
  kStartVerify,    // run the verify checks
  kStopVerify,     // cancel running verify checks
  kStopAction,     // SIGTERM the action's process group, SIGKILL after the grace period
  kScheduleRetry,  // arm the retry timer (delay doubles with each attempt)
  kResetAttempts,  // attempts = 0 (an operator asked for a fresh start)
  kAwaitApproval,  // a new attempt of an approval step: ask the operator (attempts + 1)
};

struct StepTransition {
  bool valid = false;
  StepState next = StepState::kPending;
  std::vector<StepEffect> effects;
  // Set when the step fails because it was interrupted and is not safe to repeat.
  bool interrupted = false;
};

StepTransition NextState(StepState state, const StepFacts& facts, StepEvent event);

std::string_view ToString(StepEvent event);
std::string_view ToString(StepEffect effect);

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_STEP_MACHINE_H_
