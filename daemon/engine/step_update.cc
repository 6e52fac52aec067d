#include "engine/step_update.h"

#include <algorithm>
#include <boost/json/serialize.hpp>

namespace deployd {

namespace json = boost::json;

namespace {

// A new attempt, or an operator's fresh start, begins with nothing of the last attempt.
void ClearLastAttempt(StepRecord& next, bool attempt, bool reset, std::int64_t now_ms) {
  if (reset) next.attempts = 0;
  if (!attempt && !reset) return;
  if (attempt) ++next.attempts;
  if (next.started_at_ms == 0 || reset) next.started_at_ms = now_ms;
  next.finished_at_ms = 0;
  next.exit_status.reset();
  next.pid.reset();
  next.reason.clear();
  next.evidence.clear();
  next.action.clear();
}

// The reason the next record gives: what came with the event, or what the step machine says.
void SetReason(StepRecord& next, const StepUpdateInput& in, const StepUpdate& u, bool interrupted) {
  const std::string& run = in.run_id;
  const std::string& step = in.record.id;
  if (u.Has(StepEffect::kAwaitApproval))
    next.reason = "waiting for approval: " + *in.step->approval + " (`deployctl approve " + run +
                  " " + step + "`)";
  if (!in.info.reason.empty()) next.reason = in.info.reason;
  if (interrupted)
    next.reason =
        "interrupted by a restart of deployd; not safe to repeat: "
        "`deployctl retry " +
        run + " " + step + "` once it is safe, or `deployctl skip " + run + " " + step + "`";
}

std::string EventDetail(const StepUpdateInput& in, const StepUpdate& u, const StepRecord& next) {
  std::string detail =
      u.Has(StepEffect::kFire) ? "attempt " + std::to_string(next.attempts) : next.reason;
  if (u.Has(StepEffect::kEvaluateSkip)) detail = "checking skip_if";
  if (in.event == StepEvent::kRecover) detail = "deployd restarted; " + detail;
  if (!in.info.detail.empty()) detail = in.info.detail;
  return detail;
}

}  // namespace

bool StepUpdate::Has(StepEffect effect) const {
  return std::find(effects.begin(), effects.end(), effect) != effects.end();
}

bool StepUpdate::NewAttempt() const {
  // Asking for approval is an approval step's attempt, as firing is a command's.
  return Has(StepEffect::kFire) || Has(StepEffect::kAwaitApproval);
}

bool IsStale(EventSource source, int generation, const StepGenerations& current) {
  switch (source) {
    case EventSource::kOperator:
      return false;
    case EventSource::kAction:
      return generation != current.action;
    case EventSource::kChecks:
      return generation != current.checks;
    case EventSource::kTimer:
      return generation != current.timer;
  }
  return false;
}

StepFacts FactsOf(const Step& step, const StepRecord& record, bool recovering, bool follows_output,
                  bool final) {
  StepFacts facts;
  facts.has_skip_if = !step.skip_if.empty();
  facts.has_verify = !step.verify.empty();
  facts.background = step.background;
  // Built-in actions converge: firing one again is always safe.
  facts.idempotent =
      step.idempotent || (step.kind != ActionKind::kRun && step.kind != ActionKind::kApproval);
  facts.approval = step.approval.has_value();
  facts.attempts = record.attempts;
  facts.max_attempts = final ? record.attempts : step.max_attempts();
  facts.recovering = recovering;
  facts.restart_on_stall = step.watch.on_stall == OnStall::kRestart;
  facts.follows_output = follows_output;
  return facts;
}

Duration RetryDelay(Duration retry_delay, int attempts) {
  Duration delay = retry_delay;
  for (int i = 1; i < attempts && delay < kMaxRetryDelay; ++i) delay *= 2;
  return std::min(delay, kMaxRetryDelay);
}

StepUpdate UpdateStep(const StepUpdateInput& in) {
  StepUpdate u;
  if (IsStale(in.source, in.generation, in.current)) {
    u.stale = true;
    return u;
  }
  const StepRecord& record = in.record;
  StepFacts facts = FactsOf(*in.step, record, in.recovering, in.follows_output, in.info.final);
  facts.never_started = in.never_started;
  StepTransition t = NextState(record.state, facts, in.event);
  if (!t.valid) return u;
  u.valid = true;
  u.effects = t.effects;

  StepRecord next = record;
  next.state = t.next;
  ClearLastAttempt(next, u.NewAttempt(), u.Has(StepEffect::kResetAttempts), in.now_ms);
  if (in.info.action) next.action = *in.info.action;
  if (in.info.exit_status) next.exit_status = in.info.exit_status;
  if (in.info.pid) next.pid = in.info.pid;
  SetReason(next, in, u, t.interrupted);
  if (!in.info.evidence.empty()) next.evidence = json::serialize(in.info.evidence);
  if (IsTerminal(next.state)) next.finished_at_ms = in.now_ms;
  next.due_at_ms = 0;
  if (u.Has(StepEffect::kScheduleRetry)) {
    u.retry_delay = RetryDelay(in.step->retry_delay, next.attempts);
    next.due_at_ms = in.now_ms + u.retry_delay.count();
  }

  u.commit.run_id = in.run_id;
  u.commit.at_ms = in.now_ms;
  u.commit.event.step_id = record.id;
  u.commit.event.kind = "step.state";
  u.commit.event.state = std::string(ToString(next.state));
  u.commit.event.detail = EventDetail(in, u, next);
  u.commit.step = std::move(next);
  return u;
}

}  // namespace deployd
