#include "engine/step_machine.h"

namespace deployd {
namespace {

using E = StepEffect;
using S = StepState;

StepTransition To(S next, std::vector<E> effects = {}) {
  StepTransition t;
  t.valid = true;
  t.next = next;
  t.effects = std::move(effects);
  return t;
}

// An approval step has no process: effects that stop one are left out.
std::vector<E> Stopping(const StepFacts& f, std::vector<E> effects) {
  if (f.approval) std::erase(effects, E::kStopAction);
  return effects;
}

// After a failed attempt: another attempt after the delay, or the step has failed.
StepTransition AfterFailure(const StepFacts& f, std::vector<E> stop, bool may_retry = true) {
  stop = Stopping(f, std::move(stop));
  if (may_retry && f.attempts < f.max_attempts) {
    stop.push_back(E::kScheduleRetry);
    return To(S::kPending, std::move(stop));
  }
  return To(S::kFailed, std::move(stop));
}

StepTransition Fire(const StepFacts& f) {
  return f.approval ? To(S::kWaiting, {E::kAwaitApproval}) : To(S::kRunning, {E::kFire});
}

// The action has done its part (exited 0, or started in the background).
StepTransition ActionDone(const StepFacts& f) {
  return f.has_verify ? To(S::kVerifying, {E::kStartVerify}) : To(S::kSucceeded);
}

StepTransition Interrupted() {
  StepTransition t = To(S::kFailed);
  t.interrupted = true;
  return t;
}

StepTransition OnCancel(StepState state, const StepFacts& f) {
  switch (state) {
    case S::kPending:
    case S::kWaiting:
      return To(S::kCancelled);
    case S::kRunning:
      return To(S::kCancelled, Stopping(f, {E::kStopAction}));
    case S::kVerifying:
      return To(S::kCancelled, Stopping(f, {E::kStopVerify, E::kStopAction}));
    default:
      return StepTransition{};
  }
}

// kRecover (the step's processes are gone) or kReattach (they are alive), after a restart.
StepTransition AfterRestart(StepState state, const StepFacts& f, StepEvent event) {
  if (state != S::kRunning && state != S::kVerifying) return StepTransition{};
  if (event == StepEvent::kRecover) {
    // A foreground action that had exited 0 is verified again. Otherwise nothing says
    // whether the action ran (verify checks passing prove nothing: the old server may pass
    // them): only one that never started, or a safe one, is fired.
    if (state == S::kVerifying && !f.background) return To(S::kVerifying, {E::kStartVerify});
    return f.never_started || f.idempotent || f.approval ? Fire(f) : Interrupted();
  }
  // Nothing is fired again: a background action verifies as before; a foreground one is
  // awaited, as if deployd had never gone.
  if (f.background) return ActionDone(f);
  if (state == S::kRunning && !f.approval) return To(S::kRunning);
  return StepTransition{};
}

}  // namespace

StepTransition NextState(StepState state, const StepFacts& f, StepEvent event) {
  switch (event) {
    case StepEvent::kStart:
      if (state != S::kPending) break;
      return f.has_skip_if ? To(S::kPending, {E::kEvaluateSkip}) : Fire(f);
    case StepEvent::kSkipMatched:
      if (state != S::kPending) break;
      return To(S::kSkipped);
    case StepEvent::kSkipNotMatched:
    case StepEvent::kRetryDue:
      if (state != S::kPending) break;
      return Fire(f);
    case StepEvent::kActionSucceeded:
      if (state != S::kRunning || f.background || f.approval) break;
      return ActionDone(f);
    case StepEvent::kActionStarted:
      if (state != S::kRunning || !f.background || f.approval) break;
      return ActionDone(f);
    case StepEvent::kActionFailed:
      if (f.approval) break;
      if (state == S::kRunning) return AfterFailure(f, {E::kStopAction});
      // Only a background action is still alive while the step verifies, or a followed
      // journal still speaks for a foreground one.
      if (state == S::kVerifying && (f.background || f.follows_output))
        return AfterFailure(f, {E::kStopVerify, E::kStopAction});
      break;
    case StepEvent::kStalled:
      if (f.approval) break;  // no action, no watch
      // A stall is not an ordinary failure: retries apply only with on_stall: restart. The
      // watch runs while the action does: fired, or verifying beside a background action.
      if (state == S::kRunning) return AfterFailure(f, {E::kStopAction}, f.restart_on_stall);
      if (state == S::kVerifying && f.background)
        return AfterFailure(f, {E::kStopVerify, E::kStopAction}, f.restart_on_stall);
      break;
    case StepEvent::kVerifyPassed:
      if (state != S::kVerifying) break;
      return To(S::kSucceeded);
    case StepEvent::kVerifyFailed:
      if (state != S::kVerifying) break;
      // An approval re-verified after a restart that no longer holds is asked for again.
      if (f.recovering && f.approval) return Fire(f);
      return AfterFailure(f, {E::kStopAction});
    case StepEvent::kCancel:
      return OnCancel(state, f);
    case StepEvent::kRecover:
    case StepEvent::kReattach:
      return AfterRestart(state, f, event);
    case StepEvent::kOperatorSkip:
      if (state != S::kPending && state != S::kFailed && state != S::kWaiting &&
          state != S::kCancelled)
        break;
      return To(S::kSkipped);
    case StepEvent::kOperatorRetry:
      if (!IsTerminal(state)) break;
      return To(S::kPending, {E::kResetAttempts});
    case StepEvent::kApprove:
      if (state != S::kWaiting || !f.approval) break;
      return ActionDone(f);
  }
  return StepTransition{};
}

std::string_view ToString(StepEvent event) {
  switch (event) {
    case StepEvent::kStart:
      return "start";
    case StepEvent::kSkipMatched:
      return "skip-matched";
    case StepEvent::kSkipNotMatched:
      return "skip-not-matched";
    case StepEvent::kActionSucceeded:
      return "action-succeeded";
    case StepEvent::kActionStarted:
      return "action-started";
    case StepEvent::kActionFailed:
      return "action-failed";
    case StepEvent::kStalled:
      return "stalled";
    case StepEvent::kVerifyPassed:
      return "verify-passed";
    case StepEvent::kVerifyFailed:
      return "verify-failed";
    case StepEvent::kRetryDue:
      return "retry-due";
    case StepEvent::kCancel:
      return "cancel";
    case StepEvent::kRecover:
      return "recover";
    case StepEvent::kReattach:
      return "reattach";
    case StepEvent::kOperatorSkip:
      return "operator-skip";
    case StepEvent::kOperatorRetry:
      return "operator-retry";
    case StepEvent::kApprove:
      return "approve";
  }
  return "unknown";
}

std::string_view ToString(StepEffect effect) {
  switch (effect) {
    case StepEffect::kEvaluateSkip:
      return "evaluate-skip";
    case StepEffect::kFire:
      return "fire";
    case StepEffect::kStartVerify:
      return "start-verify";
    case StepEffect::kStopVerify:
      return "stop-verify";
    case StepEffect::kStopAction:
      return "stop-action";
    case StepEffect::kScheduleRetry:
      return "schedule-retry";
    case StepEffect::kResetAttempts:
      return "reset-attempts";
    case StepEffect::kAwaitApproval:
      return "await-approval";
  }
  return "unknown";
}

}  // namespace deployd
