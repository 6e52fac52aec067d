// The binding names of run and step states (DESIGN.md §1). The names are part of the
// interface: they appear in `deployctl status --json`, in the database and in events.
#ifndef DEPLOYD_STATES_H_
#define DEPLOYD_STATES_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deployd {

enum class RunState { kPending, kRunning, kPaused, kWaiting, kSucceeded, kFailed, kCancelled };

enum class StepState {
  kPending,
  kRunning,
  kVerifying,
  kSucceeded,
  kFailed,
  kSkipped,
  kCancelled,
  kWaiting
};

std::string_view ToString(RunState state);
std::string_view ToString(StepState state);
std::optional<RunState> ParseRunState(std::string_view name);
std::optional<StepState> ParseStepState(std::string_view name);
// Every run state's name, in the order a run may go through them, for the messages that list
// them: {"pending", "running", …, "cancelled"}.
std::vector<std::string> RunStateNames();

inline bool IsTerminal(RunState s) {
  return s == RunState::kSucceeded || s == RunState::kFailed || s == RunState::kCancelled;
}
inline bool IsTerminal(StepState s) {
  return s == StepState::kSucceeded || s == StepState::kFailed || s == StepState::kSkipped ||
         s == StepState::kCancelled;
}

}  // namespace deployd

#endif  // DEPLOYD_STATES_H_
