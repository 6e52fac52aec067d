#include "deployd/states.h"

#include <array>
#include <utility>

namespace deployd {
namespace {

constexpr std::array<std::pair<RunState, std::string_view>, 7> kRunNames = {{
    {RunState::kPending, "pending"},
    {RunState::kRunning, "running"},
    {RunState::kPaused, "paused"},
    {RunState::kWaiting, "waiting"},
    {RunState::kSucceeded, "succeeded"},
    {RunState::kFailed, "failed"},
    {RunState::kCancelled, "cancelled"},
}};

constexpr std::array<std::pair<StepState, std::string_view>, 8> kStepNames = {{
    {StepState::kPending, "pending"},
    {StepState::kRunning, "running"},
    {StepState::kVerifying, "verifying"},
    {StepState::kSucceeded, "succeeded"},
    {StepState::kFailed, "failed"},
    {StepState::kSkipped, "skipped"},
    {StepState::kCancelled, "cancelled"},
    {StepState::kWaiting, "waiting"},
}};

template <typename E, size_t N>
std::string_view NameOf(const std::array<std::pair<E, std::string_view>, N>& table, E value) {
  for (const auto& [e, name] : table)
    if (e == value) return name;
  return "unknown";
}

template <typename E, size_t N>
std::optional<E> ValueOf(const std::array<std::pair<E, std::string_view>, N>& table,
                         std::string_view name) {
  for (const auto& [e, n] : table)
    if (n == name) return e;
  return std::nullopt;
}

}  // namespace

std::string_view ToString(RunState state) { return NameOf(kRunNames, state); }
std::string_view ToString(StepState state) { return NameOf(kStepNames, state); }
std::optional<RunState> ParseRunState(std::string_view name) { return ValueOf(kRunNames, name); }
std::optional<StepState> ParseStepState(std::string_view name) { return ValueOf(kStepNames, name); }

}  // namespace deployd
