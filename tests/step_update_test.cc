// What one event does to one step's record, without I/O (engine/step_update.h): the record
// committed next, the event that announces it and the effects, for each case RunManager's
// Dispatch handles.
#include "engine/step_update.h"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

#include "engine/attempt_record.h"

using namespace deployd;
namespace json = boost::json;

namespace {

constexpr std::int64_t kNow = 1'700'000'000'000;

Step CommandStep(int retries = 0) {
  Step step;
  step.id = "fetch";
  step.run.argv = {"true"};
  step.retries = retries;
  step.retry_delay = std::chrono::seconds(2);
  return step;
}

StepRecord Record(StepState state, int attempts) {
  StepRecord r;
  r.index = 0;
  r.id = "fetch";
  r.state = state;
  r.attempts = attempts;
  if (attempts > 0) r.started_at_ms = kNow - 60'000;
  return r;
}

StepUpdateInput Input(const Step& step, StepRecord record, StepEvent event,
                      StepEventInfo info = {}) {
  StepUpdateInput in;
  in.run_id = "demo-3";
  in.step = &step;
  in.record = std::move(record);
  in.event = event;
  in.info = std::move(info);
  in.now_ms = kNow;
  return in;
}

StepEventInfo Failure(const std::string& reason, int exit_status) {
  StepEventInfo info;
  info.reason = reason;
  info.exit_status = exit_status;
  info.evidence["exit_status"] = exit_status;
  return info;
}

using Effects = std::vector<StepEffect>;

}  // namespace

TEST_CASE("step update: the first fire is attempt 1, started now") {
  Step step = CommandStep();
  StepUpdate u = UpdateStep(Input(step, Record(StepState::kPending, 0), StepEvent::kStart));
  REQUIRE(u.valid);
  CHECK(u.effects == Effects{StepEffect::kFire});
  CHECK(u.NewAttempt());
  const StepRecord& next = *u.commit.step;
  CHECK(next.state == StepState::kRunning);
  CHECK(next.attempts == 1);
  CHECK(next.started_at_ms == kNow);
  CHECK(next.finished_at_ms == 0);
  CHECK(u.commit.run_id == "demo-3");
  CHECK(u.commit.at_ms == kNow);
  CHECK(u.commit.event.step_id == "fetch");
  CHECK(u.commit.event.kind == "step.state");
  CHECK(u.commit.event.state == "running");
  CHECK(u.commit.event.detail == "attempt 1");
}

TEST_CASE("step update: success ends the step, or starts its verify") {
  Step step = CommandStep();
  StepEventInfo exited;
  exited.exit_status = 0;
  StepUpdate u =
      UpdateStep(Input(step, Record(StepState::kRunning, 1), StepEvent::kActionSucceeded, exited));
  REQUIRE(u.valid);
  CHECK(u.effects.empty());
  CHECK(u.commit.step->state == StepState::kSucceeded);
  CHECK(u.commit.step->exit_status == 0);
  CHECK(u.commit.step->finished_at_ms == kNow);
  CHECK(u.commit.step->started_at_ms == kNow - 60'000);  // the first fire's, kept
  CHECK(u.commit.event.detail == "");

  step.verify.emplace_back();
  u = UpdateStep(Input(step, Record(StepState::kRunning, 1), StepEvent::kActionSucceeded));
  CHECK(u.effects == Effects{StepEffect::kStartVerify});
  CHECK(u.commit.step->state == StepState::kVerifying);
  CHECK(u.commit.step->finished_at_ms == 0);
}

TEST_CASE("step update: a failure with retries left waits for the next attempt") {
  Step step = CommandStep(/*retries=*/2);
  StepUpdate u = UpdateStep(Input(step, Record(StepState::kRunning, 1), StepEvent::kActionFailed,
                                  Failure("exit status 3", 3)));
  REQUIRE(u.valid);
  CHECK(u.effects == Effects{StepEffect::kStopAction, StepEffect::kScheduleRetry});
  CHECK(u.retry_delay == std::chrono::seconds(2));
  const StepRecord& next = *u.commit.step;
  CHECK(next.state == StepState::kPending);
  CHECK(next.reason == "exit status 3");
  CHECK(next.exit_status == 3);
  CHECK(next.evidence == R"({"exit_status":3})");
  CHECK(next.finished_at_ms == 0);
  CHECK(u.commit.event.state == "pending");
  CHECK(u.commit.event.detail == "exit status 3");

  // The retry: attempt 2 starts with nothing of attempt 1.
  u = UpdateStep(Input(step, next, StepEvent::kRetryDue));
  CHECK(u.effects == Effects{StepEffect::kFire});
  CHECK(u.commit.step->attempts == 2);
  CHECK(u.commit.step->started_at_ms == kNow - 60'000);
  CHECK(u.commit.step->reason.empty());
  CHECK(u.commit.step->evidence.empty());
  CHECK_FALSE(u.commit.step->exit_status);
  CHECK(u.commit.event.detail == "attempt 2");
}

TEST_CASE("step update: the last failed attempt fails the step") {
  Step step = CommandStep(/*retries=*/1);
  StepUpdate u = UpdateStep(Input(step, Record(StepState::kRunning, 2), StepEvent::kActionFailed,
                                  Failure("exit status 1", 1)));
  REQUIRE(u.valid);
  CHECK(u.effects == Effects{StepEffect::kStopAction});
  CHECK(u.commit.step->state == StepState::kFailed);
  CHECK(u.commit.step->finished_at_ms == kNow);
  CHECK(u.commit.event.state == "failed");
  CHECK(u.commit.event.detail == "exit status 1");
}

TEST_CASE("step update: the retry delay doubles with each attempt, up to an hour") {
  CHECK(RetryDelay(std::chrono::seconds(2), 1) == std::chrono::seconds(2));
  CHECK(RetryDelay(std::chrono::seconds(2), 2) == std::chrono::seconds(4));
  CHECK(RetryDelay(std::chrono::seconds(2), 4) == std::chrono::seconds(16));
  CHECK(RetryDelay(std::chrono::minutes(20), 3) == std::chrono::hours(1));
  CHECK(RetryDelay(std::chrono::seconds(1), 1000) == std::chrono::hours(1));

  Step step = CommandStep(/*retries=*/5);
  StepUpdate u = UpdateStep(Input(step, Record(StepState::kRunning, 3), StepEvent::kActionFailed,
                                  Failure("exit status 1", 1)));
  CHECK(u.retry_delay == std::chrono::seconds(8));
}

TEST_CASE("step update: a timeout fails the attempt like an exit") {
  Step step = CommandStep(/*retries=*/1);
  step.timeout = std::chrono::seconds(5);
  StepEventInfo info;
  info.reason = "timed out after 5s";
  info.evidence["timeout_ms"] = 5000;
  StepUpdate u =
      UpdateStep(Input(step, Record(StepState::kRunning, 1), StepEvent::kActionFailed, info));
  CHECK(u.effects == Effects{StepEffect::kStopAction, StepEffect::kScheduleRetry});
  CHECK(u.commit.step->reason == "timed out after 5s");
  CHECK(u.commit.step->evidence == R"({"timeout_ms":5000})");
  CHECK_FALSE(u.commit.step->exit_status);
}

TEST_CASE("step update: a stall is retried only with on_stall: restart") {
  Step step = CommandStep(/*retries=*/2);
  StepEventInfo info;
  info.reason = "no progress for 10m (no progress line in the output)";
  StepUpdate u = UpdateStep(Input(step, Record(StepState::kRunning, 1), StepEvent::kStalled, info));
  CHECK(u.effects == Effects{StepEffect::kStopAction});
  CHECK(u.commit.step->state == StepState::kFailed);
  CHECK(u.commit.step->reason == info.reason);

  step.watch.on_stall = OnStall::kRestart;
  u = UpdateStep(Input(step, Record(StepState::kRunning, 1), StepEvent::kStalled, info));
  CHECK(u.effects == Effects{StepEffect::kStopAction, StepEffect::kScheduleRetry});
  CHECK(u.commit.step->state == StepState::kPending);
}

TEST_CASE("step update: a fatal fail_on line skips the retries left") {
  Step step = CommandStep(/*retries=*/3);
  StepEventInfo info = Failure("CUDA out of memory: torch.OutOfMemoryError", 1);
  info.final = true;
  StepUpdate u =
      UpdateStep(Input(step, Record(StepState::kRunning, 1), StepEvent::kActionFailed, info));
  CHECK(u.effects == Effects{StepEffect::kStopAction});
  CHECK(u.commit.step->state == StepState::kFailed);
  CHECK(FactsOf(step, Record(StepState::kRunning, 1), false, false, true).max_attempts == 1);
  CHECK(FactsOf(step, Record(StepState::kRunning, 1), false, false, false).max_attempts == 4);
}

TEST_CASE("step update: cancel stops what runs") {
  Step step = CommandStep();
  StepEventInfo info;
  info.reason = "cancelled by operator";
  StepUpdate u = UpdateStep(Input(step, Record(StepState::kRunning, 1), StepEvent::kCancel, info));
  CHECK(u.effects == Effects{StepEffect::kStopAction});
  CHECK(u.commit.step->state == StepState::kCancelled);
  CHECK(u.commit.step->reason == "cancelled by operator");
  CHECK(u.commit.step->finished_at_ms == kNow);
  CHECK(u.commit.event.detail == "cancelled by operator");

  u = UpdateStep(Input(step, Record(StepState::kPending, 0), StepEvent::kCancel, info));
  CHECK(u.effects.empty());
  CHECK(u.commit.step->state == StepState::kCancelled);
}

TEST_CASE("step update: a completion of an earlier generation is stale") {
  Step step = CommandStep();
  StepUpdateInput in = Input(step, Record(StepState::kRunning, 2), StepEvent::kActionFailed,
                             Failure("killed by signal 15 (SIGTERM)", 143));
  in.current = {/*action=*/2, /*checks=*/5, /*timer=*/7};
  in.source = EventSource::kAction;
  in.generation = 1;
  StepUpdate u = UpdateStep(in);
  CHECK(u.stale);
  CHECK_FALSE(u.valid);
  CHECK_FALSE(u.commit.step);

  in.generation = 2;
  CHECK(UpdateStep(in).valid);
  CHECK(IsStale(EventSource::kChecks, 4, in.current));
  CHECK_FALSE(IsStale(EventSource::kChecks, 5, in.current));
  CHECK(IsStale(EventSource::kTimer, 6, in.current));
  CHECK_FALSE(IsStale(EventSource::kOperator, 99, in.current));
}

TEST_CASE("step update: an event that means nothing in the state changes nothing") {
  Step step = CommandStep();
  StepUpdate u = UpdateStep(Input(step, Record(StepState::kRunning, 1), StepEvent::kVerifyPassed));
  CHECK_FALSE(u.valid);
  CHECK_FALSE(u.stale);
  CHECK_FALSE(u.commit.step);
  CHECK(u.effects.empty());
}

TEST_CASE("step update: skip_if is checked first; a match skips the step") {
  Step step = CommandStep();
  step.skip_if.emplace_back();
  StepUpdate u = UpdateStep(Input(step, Record(StepState::kPending, 0), StepEvent::kStart));
  CHECK(u.effects == Effects{StepEffect::kEvaluateSkip});
  CHECK(u.commit.step->state == StepState::kPending);
  CHECK(u.commit.step->attempts == 0);
  CHECK(u.commit.event.detail == "checking skip_if");

  StepEventInfo info;
  info.reason = "skip_if: 1 check passed; already done";
  u = UpdateStep(Input(step, Record(StepState::kPending, 0), StepEvent::kSkipMatched, info));
  CHECK(u.commit.step->state == StepState::kSkipped);
  CHECK(u.commit.step->reason == info.reason);
  CHECK(u.commit.step->finished_at_ms == kNow);
}

TEST_CASE("step update: an approval step waits for the operator, who approves it") {
  Step step;
  step.id = "confirm";
  step.kind = ActionKind::kApproval;
  step.approval = "the dashboard is green";
  StepRecord record = Record(StepState::kPending, 0);
  record.id = "confirm";
  StepUpdate u = UpdateStep(Input(step, record, StepEvent::kStart));
  CHECK(u.effects == Effects{StepEffect::kAwaitApproval});
  CHECK(u.NewAttempt());
  CHECK(u.commit.step->state == StepState::kWaiting);
  CHECK(u.commit.step->attempts == 1);
  CHECK(u.commit.step->started_at_ms == kNow);
  const std::string waiting =
      "waiting for approval: the dashboard is green (`deployctl approve demo-3 confirm`)";
  CHECK(u.commit.step->reason == waiting);
  CHECK(u.commit.event.state == "waiting");
  CHECK(u.commit.event.detail == waiting);

  StepEventInfo info;
  info.reason = "approved by alice (uid 1000)";
  u = UpdateStep(Input(step, *u.commit.step, StepEvent::kApprove, info));
  CHECK(u.effects.empty());
  CHECK(u.commit.step->state == StepState::kSucceeded);
  CHECK(u.commit.step->reason == "approved by alice (uid 1000)");
}

TEST_CASE("step update: after a restart a step is fired, verified or failed as interrupted") {
  Step step = CommandStep();
  StepUpdateInput in = Input(step, Record(StepState::kRunning, 1), StepEvent::kRecover);
  in.recovering = true;
  StepUpdate u = UpdateStep(in);
  CHECK(u.effects.empty());
  CHECK(u.commit.step->state == StepState::kFailed);
  const std::string interrupted =
      "interrupted by a restart of deployd; not safe to repeat: `deployctl retry demo-3 fetch` "
      "once it is safe, or `deployctl skip demo-3 fetch`";
  CHECK(u.commit.step->reason == interrupted);
  CHECK(u.commit.event.detail == "deployd restarted; " + interrupted);

  step.idempotent = true;
  u = UpdateStep(in);
  CHECK(u.effects == Effects{StepEffect::kFire});
  CHECK(u.commit.step->attempts == 2);
  CHECK(u.commit.event.detail == "deployd restarted; attempt 2");

  // Checks that pass prove nothing about a step whose action may never have run.
  step.idempotent = false;
  step.verify.emplace_back();
  u = UpdateStep(in);
  CHECK(u.commit.step->state == StepState::kFailed);
  CHECK(u.commit.step->reason == interrupted);
  // One that provably never started is fired: that is not a repeat.
  in.never_started = true;
  u = UpdateStep(in);
  CHECK(u.effects == Effects{StepEffect::kFire});
  in.never_started = false;
  // A foreground action that had exited 0 is verified again.
  in.record = Record(StepState::kVerifying, 1);
  u = UpdateStep(in);
  CHECK(u.effects == Effects{StepEffect::kStartVerify});
  CHECK(u.commit.step->state == StepState::kVerifying);
}

TEST_CASE("step update: built-in actions converge, so they are repeated after a restart") {
  Step step;
  step.kind = ActionKind::kService;
  CHECK(FactsOf(step, Record(StepState::kRunning, 1), true, false, false).idempotent);
  step.kind = ActionKind::kRun;
  CHECK_FALSE(FactsOf(step, Record(StepState::kRunning, 1), true, false, false).idempotent);
  step.kind = ActionKind::kApproval;
  CHECK_FALSE(FactsOf(step, Record(StepState::kRunning, 1), true, false, false).idempotent);
}

TEST_CASE("step update: a followed journal still speaks while a foreground step verifies") {
  Step step = CommandStep();
  step.verify.emplace_back();
  StepUpdateInput in = Input(step, Record(StepState::kVerifying, 1), StepEvent::kActionFailed,
                             Failure("output matched fail_on 'Traceback': Traceback", 1));
  CHECK_FALSE(UpdateStep(in).valid);
  in.follows_output = true;
  StepUpdate u = UpdateStep(in);
  CHECK(u.effects == Effects{StepEffect::kStopVerify, StepEffect::kStopAction});
  CHECK(u.commit.step->state == StepState::kFailed);
}

TEST_CASE("step update: an operator's retry starts the step afresh") {
  Step step = CommandStep(/*retries=*/1);
  StepRecord failed = Record(StepState::kFailed, 2);
  failed.reason = "exit status 1";
  failed.exit_status = 1;
  failed.evidence = R"({"exit_status":1})";
  failed.finished_at_ms = kNow - 1000;
  StepUpdate u = UpdateStep(Input(step, failed, StepEvent::kOperatorRetry));
  CHECK(u.effects == Effects{StepEffect::kResetAttempts});
  CHECK_FALSE(u.NewAttempt());
  const StepRecord& next = *u.commit.step;
  CHECK(next.state == StepState::kPending);
  CHECK(next.attempts == 0);
  CHECK(next.started_at_ms == kNow);
  CHECK(next.finished_at_ms == 0);
  CHECK(next.reason.empty());
  CHECK_FALSE(next.exit_status);
  CHECK(next.evidence.empty());
  CHECK(u.commit.event.detail == "");
}

TEST_CASE("step update: an on_failure step keeps its place and phase") {
  Step step = CommandStep();
  StepRecord record = Record(StepState::kPending, 0);
  record.index = 3;
  record.phase = "on_failure";
  StepUpdate u = UpdateStep(Input(step, record, StepEvent::kStart));
  CHECK(u.commit.step->index == 3);
  CHECK(u.commit.step->phase == "on_failure");
  CHECK(u.commit.step->state == StepState::kRunning);
}

TEST_CASE("step update: what a background action's start and a reattach bring is recorded") {
  Step step = CommandStep();
  step.background = true;
  step.verify.emplace_back();
  // The fire: where the action will be found again is left to the caller (it reads the log).
  StepUpdate u = UpdateStep(Input(step, Record(StepState::kPending, 0), StepEvent::kStart));
  CHECK(u.effects == Effects{StepEffect::kFire});
  CHECK(u.commit.step->action.empty());

  StepEventInfo started;
  started.pid = 4242;
  started.action = R"({"status_file":"/x/fetch.1.status"})";
  u = UpdateStep(Input(step, Record(StepState::kRunning, 1), StepEvent::kActionStarted, started));
  CHECK(u.effects == Effects{StepEffect::kStartVerify});
  CHECK(u.commit.step->pid == 4242);
  CHECK(u.commit.step->action == *started.action);

  StepEventInfo reattached;
  reattached.detail = "deployd restarted; reattached to the background action (pid 4242)";
  u = UpdateStep(Input(step, Record(StepState::kVerifying, 1), StepEvent::kReattach, reattached));
  CHECK(u.commit.step->state == StepState::kVerifying);
  CHECK(u.commit.event.detail == reattached.detail);
}

TEST_CASE("attempt record: what a restart needs, through JSON and back") {
  AttemptRecord r;
  r.status_file = "/var/lib/deployd/logs/demo-1/fetch.2.status";
  r.log_offset = 42;
  r.boot_id = "b00t";
  r.tag = "demo-1/fetch/2";
  r.fired_at_ms = 1764650000123;
  CHECK(AttemptRecord::FromJson(r.ToJson())->ToJson() == r.ToJson());
  CHECK(AttemptRecord::FromJson(r.ToJson())->fired_at_ms == 1764650000123);
  r.action = ProcessIdentity{12, 100, "b00t"};
  r.supervisor = ProcessIdentity{11, 99, "b00t"};
  PendingStop stop;
  stop.event = StepEvent::kCancel;
  stop.reason = "cancelled by operator";
  stop.evidence["timeout_ms"] = 5;
  r.stop = stop;
  std::optional<AttemptRecord> back = AttemptRecord::FromJson(r.ToJson());
  REQUIRE(back.has_value());
  CHECK(back->ToJson() == r.ToJson());
  CHECK(back->supervisor->pid == 11);
  CHECK(back->stop->event == StepEvent::kCancel);
  // What an earlier deployd wrote for a background step reads the same.
  std::optional<AttemptRecord> old = AttemptRecord::FromJson(
      R"({"kind":"background","status_file":"/s","log_offset":3,"pid":5,"start_time":6,)"
      R"("supervisor_pid":4,"supervisor_start_time":5,"boot_id":"b"})");
  REQUIRE(old.has_value());
  CHECK(old->supervisor->pid == 4);
  CHECK(old->action->start_time == 6);
  CHECK(old->fired_at_ms == 0);  // unknown: a service's journal is then read from now on
  CHECK_FALSE(AttemptRecord::FromJson(R"({"kind":"service"})").has_value());
}
