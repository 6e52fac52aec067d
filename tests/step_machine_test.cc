// Table tests of the step machine: every (state × event) pair, for the combinations of facts
// that change its answers. A cell reads "next:effect,effect", "next!" for a step failed as
// interrupted, or "-" for a pair that is ignored. Every test walks all states × all events.
#include "engine/step_machine.h"

#include <catch2/catch.hpp>
#include <map>
#include <string>

using namespace deployd;

namespace {

constexpr StepState kAllStates[] = {
    StepState::kPending, StepState::kRunning, StepState::kVerifying, StepState::kSucceeded,
    StepState::kFailed,  StepState::kSkipped, StepState::kCancelled, StepState::kWaiting};

std::string Cell(const StepTransition& t) {
  if (!t.valid) return "-";
  std::string s(ToString(t.next));
  if (t.interrupted) s += "!";
  for (size_t i = 0; i < t.effects.size(); ++i)
    s += (i ? "," : ":") + std::string(ToString(t.effects[i]));
  return s;
}

using Row = std::map<std::string, std::string>;  // event → cell; events not listed are "-"

void CheckTable(const StepFacts& facts, const std::map<std::string, Row>& expected) {
  for (StepState state : kAllStates) {
    for (StepEvent event : kAllStepEvents) {
      std::string want = "-";
      auto row = expected.find(std::string(ToString(state)));
      if (row != expected.end()) {
        auto cell = row->second.find(std::string(ToString(event)));
        if (cell != row->second.end()) want = cell->second;
      }
      INFO("state " << ToString(state) << ", event " << ToString(event));
      CHECK(Cell(NextState(state, facts, event)) == want);
    }
  }
}

// The rows every variant shares: terminal states and operator verbs.
std::map<std::string, Row> Common() {
  return {
      {"succeeded", {{"operator-retry", "pending:reset-attempts"}}},
      {"skipped", {{"operator-retry", "pending:reset-attempts"}}},
      {"failed", {{"operator-skip", "skipped"}, {"operator-retry", "pending:reset-attempts"}}},
      {"cancelled", {{"operator-skip", "skipped"}, {"operator-retry", "pending:reset-attempts"}}},
      {"waiting", {{"cancel", "cancelled"}, {"operator-skip", "skipped"}}},
  };
}

}  // namespace

TEST_CASE("step machine: foreground step, no checks, last attempt") {
  StepFacts f;
  f.attempts = 1;
  auto table = Common();
  table["pending"] = {{"start", "running:fire"},
                      {"skip-matched", "skipped"},
                      {"skip-not-matched", "running:fire"},
                      {"retry-due", "running:fire"},
                      {"cancel", "cancelled"},
                      {"operator-skip", "skipped"}};
  table["running"] = {{"action-succeeded", "succeeded"},
                      {"action-failed", "failed:stop-action"},
                      {"stalled", "failed:stop-action"},
                      {"cancel", "cancelled:stop-action"},
                      {"recover", "failed!"},
                      {"reattach", "running"}};
  table["verifying"] = {{"verify-passed", "succeeded"},
                        {"verify-failed", "failed:stop-action"},
                        {"cancel", "cancelled:stop-verify,stop-action"},
                        {"recover", "verifying:start-verify"}};
  CheckTable(f, table);
}

TEST_CASE("step machine: skip_if and verify, attempts left") {
  StepFacts f;
  f.has_skip_if = true;
  f.has_verify = true;
  f.attempts = 1;
  f.max_attempts = 3;
  auto table = Common();
  table["pending"] = {{"start", "pending:evaluate-skip"},
                      {"skip-matched", "skipped"},
                      {"skip-not-matched", "running:fire"},
                      {"retry-due", "running:fire"},
                      {"cancel", "cancelled"},
                      {"operator-skip", "skipped"}};
  table["running"] = {{"action-succeeded", "verifying:start-verify"},
                      {"action-failed", "pending:stop-action,schedule-retry"},
                      // on_stall: fail — a stall does not use the attempts left.
                      {"stalled", "failed:stop-action"},
                      {"cancel", "cancelled:stop-action"},
                      // Passing checks do not prove the action ran: not safe to repeat.
                      {"recover", "failed!"},
                      {"reattach", "running"}};
  table["verifying"] = {{"verify-passed", "succeeded"},
                        {"verify-failed", "pending:stop-action,schedule-retry"},
                        {"cancel", "cancelled:stop-verify,stop-action"},
                        {"recover", "verifying:start-verify"}};
  CheckTable(f, table);
}

TEST_CASE("step machine: foreground service step whose journal is followed while it verifies") {
  StepFacts f;
  f.has_verify = true;
  f.idempotent = true;
  f.follows_output = true;
  f.attempts = 1;
  auto table = Common();
  table["pending"] = {{"start", "running:fire"},
                      {"skip-matched", "skipped"},
                      {"skip-not-matched", "running:fire"},
                      {"retry-due", "running:fire"},
                      {"cancel", "cancelled"},
                      {"operator-skip", "skipped"}};
  table["running"] = {{"action-succeeded", "verifying:start-verify"},
                      {"action-failed", "failed:stop-action"},
                      {"stalled", "failed:stop-action"},
                      {"cancel", "cancelled:stop-action"},
                      {"recover", "running:fire"},
                      {"reattach", "running"}};
  // A fail_on line of the journal (vLLM's CUDA OOM) ends the wait for readiness.
  table["verifying"] = {{"action-failed", "failed:stop-verify,stop-action"},
                        {"verify-passed", "succeeded"},
                        {"verify-failed", "failed:stop-action"},
                        {"cancel", "cancelled:stop-verify,stop-action"},
                        {"recover", "verifying:start-verify"}};
  CheckTable(f, table);
}

TEST_CASE("step machine: background step with verify, last attempt") {
  StepFacts f;
  f.background = true;
  f.has_verify = true;
  f.attempts = 2;
  f.max_attempts = 2;
  auto table = Common();
  table["pending"] = {{"start", "running:fire"},
                      {"skip-matched", "skipped"},
                      {"skip-not-matched", "running:fire"},
                      {"retry-due", "running:fire"},
                      {"cancel", "cancelled"},
                      {"operator-skip", "skipped"}};
  table["running"] = {{"action-started", "verifying:start-verify"},
                      {"action-failed", "failed:stop-action"},
                      {"stalled", "failed:stop-action"},
                      {"cancel", "cancelled:stop-action"},
                      {"recover", "failed!"},
                      {"reattach", "verifying:start-verify"}};
  table["verifying"] = {{"action-failed", "failed:stop-verify,stop-action"},
                        {"stalled", "failed:stop-verify,stop-action"},
                        {"verify-passed", "succeeded"},
                        {"verify-failed", "failed:stop-action"},
                        {"cancel", "cancelled:stop-verify,stop-action"},
                        {"recover", "failed!"},
                        {"reattach", "verifying:start-verify"}};
  CheckTable(f, table);
}

TEST_CASE("step machine: recovering an idempotent background step without verify") {
  StepFacts f;
  f.background = true;
  f.idempotent = true;
  f.recovering = true;
  f.attempts = 1;
  auto table = Common();
  table["pending"] = {{"start", "running:fire"},
                      {"skip-matched", "skipped"},
                      {"skip-not-matched", "running:fire"},
                      {"retry-due", "running:fire"},
                      {"cancel", "cancelled"},
                      {"operator-skip", "skipped"}};
  table["running"] = {{"action-started", "succeeded"},   {"action-failed", "failed:stop-action"},
                      {"stalled", "failed:stop-action"}, {"cancel", "cancelled:stop-action"},
                      {"recover", "running:fire"},       {"reattach", "succeeded"}};
  table["verifying"] = {{"action-failed", "failed:stop-verify,stop-action"},
                        {"stalled", "failed:stop-verify,stop-action"},
                        {"verify-passed", "succeeded"},
                        {"verify-failed", "failed:stop-action"},
                        {"cancel", "cancelled:stop-verify,stop-action"},
                        {"recover", "running:fire"},
                        {"reattach", "succeeded"}};
  CheckTable(f, table);
}

TEST_CASE("step machine: on_stall restart, background step with attempts left") {
  StepFacts f;
  f.background = true;
  f.has_verify = true;
  f.restart_on_stall = true;
  f.attempts = 1;
  f.max_attempts = 2;
  auto table = Common();
  table["pending"] = {{"start", "running:fire"},
                      {"skip-matched", "skipped"},
                      {"skip-not-matched", "running:fire"},
                      {"retry-due", "running:fire"},
                      {"cancel", "cancelled"},
                      {"operator-skip", "skipped"}};
  table["running"] = {{"action-started", "verifying:start-verify"},
                      {"action-failed", "pending:stop-action,schedule-retry"},
                      {"stalled", "pending:stop-action,schedule-retry"},
                      {"cancel", "cancelled:stop-action"},
                      {"recover", "failed!"},
                      {"reattach", "verifying:start-verify"}};
  table["verifying"] = {{"action-failed", "pending:stop-verify,stop-action,schedule-retry"},
                        {"stalled", "pending:stop-verify,stop-action,schedule-retry"},
                        {"verify-passed", "succeeded"},
                        {"verify-failed", "pending:stop-action,schedule-retry"},
                        {"cancel", "cancelled:stop-verify,stop-action"},
                        {"recover", "failed!"},
                        {"reattach", "verifying:start-verify"}};
  CheckTable(f, table);
}

TEST_CASE("step machine: on_stall restart, foreground step on its last attempt") {
  StepFacts f;
  f.has_verify = true;
  f.restart_on_stall = true;
  f.attempts = 3;
  f.max_attempts = 3;
  auto table = Common();
  table["pending"] = {{"start", "running:fire"},
                      {"skip-matched", "skipped"},
                      {"skip-not-matched", "running:fire"},
                      {"retry-due", "running:fire"},
                      {"cancel", "cancelled"},
                      {"operator-skip", "skipped"}};
  // The action has exited once the step verifies: nothing is left to stall.
  table["running"] = {{"action-succeeded", "verifying:start-verify"},
                      {"action-failed", "failed:stop-action"},
                      {"stalled", "failed:stop-action"},
                      {"cancel", "cancelled:stop-action"},
                      {"recover", "failed!"},
                      {"reattach", "running"}};
  table["verifying"] = {{"verify-passed", "succeeded"},
                        {"verify-failed", "failed:stop-action"},
                        {"cancel", "cancelled:stop-verify,stop-action"},
                        {"recover", "verifying:start-verify"}};
  CheckTable(f, table);
}

TEST_CASE("step machine: a re-verify after a restart that fails is an ordinary failure") {
  StepFacts f;
  f.has_verify = true;
  f.recovering = true;
  f.attempts = 1;
  f.max_attempts = 5;  // the step verifies because its action exited 0: it did run
  StepTransition t = NextState(StepState::kVerifying, f, StepEvent::kVerifyFailed);
  CHECK(Cell(t) == "pending:stop-action,schedule-retry");
}

TEST_CASE("step machine: approval step without verify, last attempt") {
  StepFacts f;
  f.approval = true;
  f.attempts = 1;
  auto table = Common();
  table["pending"] = {{"start", "waiting:await-approval"},
                      {"skip-matched", "skipped"},
                      {"skip-not-matched", "waiting:await-approval"},
                      {"retry-due", "waiting:await-approval"},
                      {"cancel", "cancelled"},
                      {"operator-skip", "skipped"}};
  // An approval step never runs a process: action events are stale, nothing is stopped, and
  // an interrupted step asks again (asking is always safe).
  table["running"] = {{"cancel", "cancelled"}, {"recover", "waiting:await-approval"}};
  table["verifying"] = {{"verify-passed", "succeeded"},
                        {"verify-failed", "failed"},
                        {"cancel", "cancelled:stop-verify"},
                        {"recover", "verifying:start-verify"}};
  table["waiting"]["approve"] = "succeeded";
  CheckTable(f, table);
}

TEST_CASE("step machine: approval step with skip_if and verify, attempts left") {
  StepFacts f;
  f.approval = true;
  f.has_skip_if = true;
  f.has_verify = true;
  f.attempts = 1;
  f.max_attempts = 2;
  auto table = Common();
  table["pending"] = {{"start", "pending:evaluate-skip"},
                      {"skip-matched", "skipped"},
                      {"skip-not-matched", "waiting:await-approval"},
                      {"retry-due", "waiting:await-approval"},
                      {"cancel", "cancelled"},
                      {"operator-skip", "skipped"}};
  table["running"] = {{"cancel", "cancelled"}, {"recover", "waiting:await-approval"}};
  table["verifying"] = {{"verify-passed", "succeeded"},
                        {"verify-failed", "pending:schedule-retry"},
                        {"cancel", "cancelled:stop-verify"},
                        {"recover", "verifying:start-verify"}};
  table["waiting"]["approve"] = "verifying:start-verify";
  CheckTable(f, table);
}

TEST_CASE("step machine: recovering an approval step whose re-verify fails asks again") {
  StepFacts f;
  f.approval = true;
  f.has_verify = true;
  f.recovering = true;
  f.attempts = 1;
  auto table = Common();
  table["pending"] = {{"start", "waiting:await-approval"},
                      {"skip-matched", "skipped"},
                      {"skip-not-matched", "waiting:await-approval"},
                      {"retry-due", "waiting:await-approval"},
                      {"cancel", "cancelled"},
                      {"operator-skip", "skipped"}};
  table["running"] = {{"cancel", "cancelled"}, {"recover", "waiting:await-approval"}};
  table["verifying"] = {{"verify-passed", "succeeded"},
                        {"verify-failed", "waiting:await-approval"},
                        {"cancel", "cancelled:stop-verify"},
                        {"recover", "verifying:start-verify"}};
  table["waiting"]["approve"] = "verifying:start-verify";
  CheckTable(f, table);
}

TEST_CASE("step machine: after a restart, an action that never started is fired, not failed") {
  StepFacts f;
  f.has_verify = true;
  f.recovering = true;
  f.never_started = true;
  f.attempts = 1;
  CHECK(Cell(NextState(StepState::kRunning, f, StepEvent::kRecover)) == "running:fire");
  f.never_started = false;
  CHECK(Cell(NextState(StepState::kRunning, f, StepEvent::kRecover)) == "failed!");
}
