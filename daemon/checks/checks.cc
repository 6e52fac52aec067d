#include "checks/checks.h"

#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>
#include <chrono>

#include "checks/benchmark_probe.h"
#include "checks/command_probes.h"
#include "checks/file_probes.h"
#include "checks/network_probes.h"
#include "checks/probe_in_child.h"

namespace deployd {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

// Cancellation is not an outcome: it leaves as operation_aborted, like any cancelled Asio
// operation, so that the caller's coroutine unwinds to its edge.
asio::awaitable<void> ThrowIfCancelled() {
  asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
  if (state.cancelled() != asio::cancellation_type::none)
    throw boost::system::system_error(asio::error::operation_aborted);
}

}  // namespace

asio::awaitable<CheckOutcome> ProbeOnce(const Check& check, const BenchmarkBaseline* baseline) {
  auto start = Clock::now();
  CheckOutcome outcome;
  switch (check.kind) {
    case CheckKind::kRun:
      outcome = co_await ProbeRun(check);
      break;
    case CheckKind::kHttp:
      outcome = co_await ProbeHttp(check);
      break;
    case CheckKind::kTcp:
      outcome = co_await ProbeTcp(check);
      break;
    case CheckKind::kFile:
      outcome = ProbeFile(check);
      break;
    case CheckKind::kCommand:
      outcome = ProbeCommand(check);
      break;
    case CheckKind::kDiskFree:
      outcome = ProbeDiskFree(check);
      break;
    case CheckKind::kPortFree:
      outcome = ProbePortFree(check);
      break;
    case CheckKind::kWeightsComplete:
      // Hashing hundreds of GB must not hold the daemon's thread; sizes alone are quick.
      // (Not a conditional expression: GCC 12 miscompiles co_await inside one.)
      if (check.sha256.empty()) {
        outcome = ProbeWeights(check);
      } else {
        outcome = co_await ProbeInChild(check);
      }
      break;
    case CheckKind::kService:
    case CheckKind::kProcess:
    case CheckKind::kGpusFree:
      outcome = co_await ProbeInChild(check);
      break;
    case CheckKind::kBenchmark: {
      const BenchmarkBaseline none;
      const BenchmarkBaseline& against = baseline ? *baseline : none;
      outcome = co_await ProbeBenchmark(check, against);
      break;
    }
  }
  // A network probe that was cancelled returns an error like any other; it must not pass for
  // the check's failure.
  co_await ThrowIfCancelled();
  outcome.attempts = 1;
  outcome.evidence["elapsed_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  co_return outcome;
}

asio::awaitable<CheckOutcome> RunCheck(const Check& check, const BenchmarkBaseline* baseline) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  if (check.after.count() > 0) {
    timer.expires_after(check.after);
    co_await timer.async_wait(asio::use_awaitable);
  }
  auto deadline = Clock::now() + check.within.value_or(Duration(0));
  int attempts = 0;
  while (true) {
    CheckOutcome outcome = co_await ProbeOnce(check, baseline);
    outcome.attempts = ++attempts;
    auto now = Clock::now();
    if (outcome.passed || !check.within || now >= deadline) co_return outcome;
    // The last try is made at the deadline itself rather than one `every` short of it.
    timer.expires_at(std::min(now + check.every, deadline));
    co_await timer.async_wait(asio::use_awaitable);
  }
}

}  // namespace deployd
