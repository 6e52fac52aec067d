// The `benchmark` check's attempt: the quality request of `expect` (one completion at
// temperature 0), then `requests` streamed completions, at most `concurrency` at a time, each
// on its own connection, measured as their chunks arrive (benchmark_verdict.h turns that into
// figures and a verdict). Everything is bounded by the check's `timeout`.
//
// On the daemon's io_context, without threads: each connection is a coroutine spawned without a
// cancellation slot (Boost 1.81's co_spawn throws out of io_context::run when a cancellation
// meets one that is starting or ending), stopped by closing its socket; the probe waits for them
// on a timer that the last one cancels, or that expires at the deadline. When the awaiting
// coroutine is cancelled, every connection is closed and the probe returns at once.
//
// Request body (JSON): {"model", "prompt" (api: completions) or "messages" (api: chat),
// "max_tokens", "stream": true, "stream_options": {"include_usage": true}, "ignore_eos"?,
// "temperature": 0 (the quality request)}.
#ifndef DEPLOYD_CHECKS_BENCHMARK_PROBE_H_
#define DEPLOYD_CHECKS_BENCHMARK_PROBE_H_

#include <boost/asio/awaitable.hpp>
#include <string>

#include "checks/benchmark_verdict.h"
#include "checks/checks.h"
#include "deployd/plan.h"

namespace deployd {

// The outcome's evidence and `measured` carry {"benchmark": figures, "baseline": …,
// "quality": {"prompt", "answer", "passed"}} (what was measured before a failure, too).
boost::asio::awaitable<CheckOutcome> ProbeBenchmark(const Check& check,
                                                    const BenchmarkBaseline& baseline);

// The prompt of request `request` when the plan gives `prompt_tokens`: that many common English
// words (about one token each), in an order of its own for each request, so that a prefix
// cache cannot answer one request from another.
std::string SyntheticPrompt(int words, int request);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_BENCHMARK_PROBE_H_
