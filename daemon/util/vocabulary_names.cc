// The names of the shared vocabulary's enums (include/deployd/): run and step states, check
// and action kinds — one table each, read both ways.
#include <array>
#include <utility>

#include "deployd/plan.h"
#include "deployd/states.h"

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

constexpr std::array<std::pair<CheckKind, std::string_view>, 12> kCheckNames = {{
    {CheckKind::kRun, "run"},
    {CheckKind::kHttp, "http"},
    {CheckKind::kTcp, "tcp"},
    {CheckKind::kFile, "file"},
    {CheckKind::kCommand, "command"},
    {CheckKind::kDiskFree, "disk_free"},
    {CheckKind::kPortFree, "port_free"},
    {CheckKind::kWeightsComplete, "weights_complete"},
    {CheckKind::kService, "service"},
    {CheckKind::kProcess, "process"},
    {CheckKind::kGpusFree, "gpus_free"},
    {CheckKind::kBenchmark, "benchmark"},
}};

constexpr std::array<std::pair<ActionKind, std::string_view>, 7> kActionNames = {{
    {ActionKind::kRun, "run"},
    {ActionKind::kApproval, "approval"},
    {ActionKind::kService, "service"},
    {ActionKind::kKill, "kill"},
    {ActionKind::kGpusFree, "gpus_free"},
    {ActionKind::kRemove, "remove"},
    {ActionKind::kDownload, "download"},
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

std::vector<std::string> RunStateNames() {
  std::vector<std::string> names;
  for (const auto& entry : kRunNames) names.emplace_back(entry.second);
  return names;
}

std::string_view ToString(CheckKind kind) { return NameOf(kCheckNames, kind); }
std::string_view ToString(ActionKind kind) { return NameOf(kActionNames, kind); }
std::optional<CheckKind> ParseCheckKind(std::string_view name) {
  return ValueOf(kCheckNames, name);
}
std::optional<ActionKind> ParseActionKind(std::string_view name) {
  return ValueOf(kActionNames, name);
}

}  // namespace deployd
