#include "engine/check_sequence.h"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <string>

namespace deployd {

boost::asio::awaitable<CheckOutcome> RunChecks(std::vector<Check> checks) {
  CheckOutcome last;
  last.passed = true;
  for (const Check& check : checks) {
    last = co_await RunCheck(check);
    if (!last.passed) {
      last.evidence["check"] = DescribeCheck(check);
      last.evidence["summary"] = last.summary;
      last.evidence["attempts"] = last.attempts;
      co_return last;
    }
  }
  last.summary =
      std::to_string(checks.size()) + (checks.size() == 1 ? " check" : " checks") + " passed";
  co_return last;
}

struct RunningChecks::State {
  bool started = false;
  bool finished = false;
  bool cancelled = false;
};

namespace {

boost::asio::awaitable<CheckOutcome> RunMarked(std::vector<Check> checks,
                                               std::shared_ptr<RunningChecks::State> state) {
  state->started = true;
  if (state->cancelled) co_return CheckOutcome{};
  CheckOutcome outcome = co_await RunChecks(std::move(checks));
  state->finished = true;  // from here on, a cancellation must not reach the coroutine
  co_return outcome;
}

}  // namespace

std::shared_ptr<RunningChecks> RunningChecks::Start(boost::asio::any_io_executor ex,
                                                    std::vector<Check> checks, Done done) {
  auto running = std::make_shared<RunningChecks>();
  running->signal_ = std::make_shared<boost::asio::cancellation_signal>();
  running->state_ = std::make_shared<State>();
  auto on_end = [signal = running->signal_, state = running->state_, done = std::move(done)](
                    std::exception_ptr e, CheckOutcome outcome) {
    state->finished = true;
    if (!e && !state->cancelled) done(std::move(outcome));
  };
  boost::asio::co_spawn(ex, RunMarked(std::move(checks), running->state_),
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
