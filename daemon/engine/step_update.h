// StepUpdate: what one event does to one step's record, decided without I/O. From the facts —
// the step's committed record, the event and what came with it, where it came from, the plan's
// step, whether the step is recovering or follows a journal, the time — to what the run
// manager must do: the record to commit next, the event that announces it, and the step
// machine's effects in order (with the retry delay they need). Nothing is committed, started
// or armed here. An event that means nothing in the step's state (the step machine's
// `valid == false`) is `valid == false` and changes nothing; so is a completion from an
// earlier generation, which is also `stale`.
//
// RunManager::Dispatch commits the result and carries out its effects. One part of the record
// is left to it: where a background step's new attempt will be found again (its status file
// and log offset, engine/attempt_record.h), which needs the log file's size.
//
// Pure: no store, no clock (the time is given), no processes or timers (tests/layers_check.py
// holds this file to the step machine's rule; it names the store's plain records only).
#ifndef DEPLOYD_ENGINE_STEP_UPDATE_H_
#define DEPLOYD_ENGINE_STEP_UPDATE_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deployd/plan.h"
#include "engine/step_machine.h"
#include "store/run_store.h"

namespace deployd {

// Where an event comes from: the operator or the scheduler, or an asynchronous completion of
// the step's action, checks or timer, stamped with the generation it was started under.
enum class EventSource { kOperator, kAction, kChecks, kTimer };

// A step's current generations. Each start of an action, of checks, of a timer takes a new
// one; a completion of an earlier one (a child killed by a timeout that exits later, say) is
// stale.
struct StepGenerations {
  int action = 0;
  int checks = 0;
  int timer = 0;
};

bool IsStale(EventSource source, int generation, const StepGenerations& current);

// What an event brings besides its kind: why, and the evidence for it.
struct StepEventInfo {
  std::string reason;
  boost::json::object evidence;
  std::optional<int> exit_status;
  std::optional<std::int64_t> pid;
  std::optional<std::string> action;  // replaces the step's action record
  std::string detail;                 // the event's detail, when not the reason
  bool final = false;                 // no retry can help (a fatal fail_on line)
};

struct StepUpdateInput {
  std::string run_id;
  const Step* step = nullptr;  // the plan's step; REQUIRES: not null
  StepRecord record;           // as committed
  StepEvent event = StepEvent::kStart;
  EventSource source = EventSource::kOperator;
  int generation = 0;  // of a completion (kAction, kChecks, kTimer)
  StepGenerations current;
  StepEventInfo info;
  bool recovering = false;      // re-verifying after a restart interrupted the step
  bool never_started = false;   // recovering: the attempt's action provably never started
  bool follows_output = false;  // a journal is followed for fail_on while the step verifies
  std::int64_t now_ms = 0;
};

struct StepUpdate {
  bool valid = false;
  bool stale = false;  // not valid because the completion is from an earlier generation
  // The step's next record (`commit.step`) and its "step.state" event, at `now_ms`.
  Transition commit;
  std::vector<StepEffect> effects;  // in order
  Duration retry_delay{0};          // with StepEffect::kScheduleRetry

  bool Has(StepEffect effect) const;
  // A new attempt starts: the action is fired, or an approval asked for.
  bool NewAttempt() const;
};

// The retry delay doubles with each attempt, up to this.
inline constexpr Duration kMaxRetryDelay = std::chrono::hours(1);

// What the step machine is told about the step.
StepFacts FactsOf(const Step& step, const StepRecord& record, bool recovering, bool follows_output,
                  bool final);

// The delay before the attempt after `attempts` failed ones: retry_delay × 2^(attempts-1).
Duration RetryDelay(Duration retry_delay, int attempts);

StepUpdate UpdateStep(const StepUpdateInput& input);

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_STEP_UPDATE_H_
