#include "engine/check_sequence.h"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <string>

namespace deployd {

boost::asio::awaitable<CheckOutcome> RunChecks(std::vector<Check> checks,
                                               BenchmarkBaseline baseline) {
  CheckOutcome last;
  last.passed = true;
  boost::json::object measured;
  std::string benchmark_summary;
  for (const Check& check : checks) {
    last = co_await RunCheck(check, &baseline);
    if (!last.passed) {
      last.evidence["check"] = DescribeCheck(check);
      last.evidence["summary"] = last.summary;
      last.evidence["attempts"] = last.attempts;
      // What the checks before it measured (the version that is being benchmarked, say).
      for (const auto& [key, value] : measured)
        if (!last.evidence.contains(key)) last.evidence[key] = value;
      co_return last;
    }
    for (const auto& [key, value] : last.measured) measured[key] = value;
    if (check.kind == CheckKind::kBenchmark) benchmark_summary = last.summary;
  }
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
                                               BenchmarkBaseline baseline,
                                               std::shared_ptr<RunningChecks::State> state) {
  state->started = true;
  if (state->cancelled) co_return CheckOutcome{};
  CheckOutcome outcome = co_await RunChecks(std::move(checks), std::move(baseline));
  state->finished = true;  // from here on, a cancellation must not reach the coroutine
  co_return outcome;
}

}  // namespace

std::shared_ptr<RunningChecks> RunningChecks::Start(boost::asio::any_io_executor ex,
                                                    std::vector<Check> checks, Done done,
                                                    BenchmarkBaseline baseline) {
  auto running = std::make_shared<RunningChecks>();
  running->signal_ = std::make_shared<boost::asio::cancellation_signal>();
  running->state_ = std::make_shared<State>();
  auto on_end = [signal = running->signal_, state = running->state_, done = std::move(done)](
                    std::exception_ptr e, CheckOutcome outcome) {
    state->finished = true;
    if (!e && !state->cancelled) done(std::move(outcome));
  };
  boost::asio::co_spawn(ex, RunMarked(std::move(checks), std::move(baseline), running->state_),
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
