// RunChecks: a list of checks (a step's skip_if or verify) run in order on the caller's
// executor; the first failure ends it. A plan's preflight runs every check whatever failed
// before it (Order::kEvery), so that the operator learns every problem at once. The outcome of a
// failure carries its check in the evidence ("check", "summary", "attempts"); a pass says how many
// passed. What the checks measured (CheckOutcome::measured: a benchmark's figures, a version) is in
// the evidence either way, and a benchmark that passed gives its summary to the pass ("summary").
// Cancelling the coroutine stops the check that runs.
#ifndef DEPLOYD_ENGINE_CHECK_SEQUENCE_H_
#define DEPLOYD_ENGINE_CHECK_SEQUENCE_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "checks/benchmark_verdict.h"
#include "checks/checks.h"
#include "deployd/plan.h"

namespace deployd {

enum class Order { kUntilFailure, kEvery };

// `baseline` is what a benchmark among the checks is compared with. `failed` are problems
// found before any check ran (a preflight's secrets), counted as failed checks.
boost::asio::awaitable<CheckOutcome> RunChecks(std::vector<Check> checks,
                                               BenchmarkBaseline baseline = {},
                                               Order order = Order::kUntilFailure,
                                               std::vector<CheckOutcome> failed = {});

// Several failures as one: the first's evidence when there is one; else "A; B (2 of 3 checks
// failed)", at most kShownFailures named, with every failure's evidence in "failures".
inline constexpr std::size_t kShownFailures = 5;
CheckOutcome CombineFailures(std::vector<CheckOutcome> failures, std::size_t checks);

// RunChecks started on `ex`, with `done` called once with its outcome — or not at all once
// cancelled. Cancel() is safe at any time: Boost 1.81's co_spawn throws from its entry point
// (and so out of io_context::run) when a cancellation arrives before the coroutine has
// started or after it has returned but before its handler has run, so only a sequence that
// is under way is given the cancellation; one not started yet returns as soon as it starts.
class RunningChecks {
 public:
  using Done = std::function<void(CheckOutcome outcome)>;
  static std::shared_ptr<RunningChecks> Start(boost::asio::any_io_executor ex,
                                              std::vector<Check> checks, Done done,
                                              BenchmarkBaseline baseline = {},
                                              Order order = Order::kUntilFailure,
                                              std::vector<CheckOutcome> failed = {});
  void Cancel();

  struct State;

 private:
  std::shared_ptr<boost::asio::cancellation_signal> signal_;
  std::shared_ptr<State> state_;
};

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_CHECK_SEQUENCE_H_
