#include "engine/check_sequence.h"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <string>

namespace deployd {

namespace {

// A failed check's outcome, its evidence saying which check and how it ended.
CheckOutcome Failed(CheckOutcome outcome, const Check& check) {
  outcome.evidence["check"] = DescribeCheck(check);
  outcome.evidence["summary"] = outcome.summary;
  outcome.evidence["attempts"] = outcome.attempts;
  return outcome;
}

}  // namespace

CheckOutcome CombineFailures(std::vector<CheckOutcome> failures, std::size_t checks) {
  if (failures.size() == 1) return std::move(failures.front());
  CheckOutcome combined;
  std::string named;
  boost::json::array all;
  for (std::size_t i = 0; i < failures.size(); ++i) {
    if (i < kShownFailures) named += (i ? "; " : "") + failures[i].summary;
    all.emplace_back(std::move(failures[i].evidence));
  }
  if (failures.size() > kShownFailures)
    named += "; and " + std::to_string(failures.size() - kShownFailures) + " more";
  combined.summary = named + " (" + std::to_string(failures.size()) + " of " +
                     std::to_string(checks) + " checks failed)";
  combined.evidence["summary"] = combined.summary;
  combined.evidence["failures"] = std::move(all);
  combined.attempts = failures.front().attempts;
  return combined;
}

boost::asio::awaitable<CheckOutcome> RunChecks(std::vector<Check> checks,
                                               BenchmarkBaseline baseline, Order order,
                                               std::vector<CheckOutcome> failed) {
  CheckOutcome last;
  boost::json::object measured;
  std::string benchmark_summary;
  const std::size_t total = checks.size() + failed.size();
  for (const Check& check : checks) {
    if (!failed.empty() && order == Order::kUntilFailure) break;
    last = co_await RunCheck(check, &baseline);
    if (!last.passed) {
      failed.push_back(Failed(std::move(last), check));
      continue;
    }
    for (const auto& [key, value] : last.measured) measured[key] = value;
    if (check.kind == CheckKind::kBenchmark) benchmark_summary = last.summary;
  }
  if (!failed.empty()) {
    CheckOutcome outcome = CombineFailures(std::move(failed), total);
    outcome.passed = false;
    // What the checks that passed measured (the version that is being benchmarked, say).
    for (const auto& [key, value] : measured)
      if (!outcome.evidence.contains(key)) outcome.evidence[key] = value;
    co_return outcome;
  }
  last.passed = true;
  last.summary =
      std::to_string(checks.size()) + (checks.size() == 1 ? " check" : " checks") + " passed";
  last.evidence = std::move(measured);
  if (!benchmark_summary.empty()) last.evidence["summary"] = benchmark_summary;
  co_return last;
}

struct RunningChecks::State {
  bool started = false;
  bool finished = false;
  bool cancelled = false;
};

namespace {

boost::asio::awaitable<CheckOutcome> RunMarked(std::vector<Check> checks,
                                               BenchmarkBaseline baseline, Order order,
                                               std::vector<CheckOutcome> failed,
                                               std::shared_ptr<RunningChecks::State> state) {
  state->started = true;
  if (state->cancelled) co_return CheckOutcome{};
  CheckOutcome outcome =
      co_await RunChecks(std::move(checks), std::move(baseline), order, std::move(failed));
  state->finished = true;  // from here on, a cancellation must not reach the coroutine
  co_return outcome;
}

}  // namespace

std::shared_ptr<RunningChecks> RunningChecks::Start(boost::asio::any_io_executor ex,
                                                    std::vector<Check> checks, Done done,
                                                    BenchmarkBaseline baseline, Order order,
                                                    std::vector<CheckOutcome> failed) {
  auto running = std::make_shared<RunningChecks>();
  running->signal_ = std::make_shared<boost::asio::cancellation_signal>();
  running->state_ = std::make_shared<State>();
  auto on_end = [signal = running->signal_, state = running->state_, done = std::move(done)](
                    std::exception_ptr e, CheckOutcome outcome) {
    state->finished = true;
    if (!e && !state->cancelled) done(std::move(outcome));
  };
  boost::asio::co_spawn(
      ex,
      RunMarked(std::move(checks), std::move(baseline), order, std::move(failed), running->state_),
      boost::asio::bind_cancellation_slot(running->signal_->slot(), on_end));
  return running;
}

void RunningChecks::Cancel() {
  if (state_->finished || state_->cancelled) return;
  state_->cancelled = true;
  // Not yet started: it returns at once when it starts.
  if (state_->started) signal_->emit(boost::asio::cancellation_type::terminal);
}

}  // namespace deployd
