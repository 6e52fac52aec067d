// The pure half of the `benchmark` check: from what each streamed request looked like to the
// figures (percentiles, rates), and from the figures to the verdict — the plan's absolute
// bounds (`at_least`, `at_most`), the regression against a baseline (the figures of the last
// succeeded run of the same plan), and the quality smoke (`expect`). No I/O; the messages are
// pinned by tests/benchmark_verdict_test.cc.
#ifndef DEPLOYD_CHECKS_BENCHMARK_VERDICT_H_
#define DEPLOYD_CHECKS_BENCHMARK_VERDICT_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deployd/plan.h"
#include "protocol/benchmark_wire.h"

namespace deployd {

// One request as the client saw it; times in milliseconds from the benchmark's start.
struct RequestSample {
  double start_ms = 0;                   // before it connected
  double end_ms = 0;                     // its last read: when it ended, once `ended`
  bool ended = false;                    // its stream ended, or it failed
  std::optional<double> first_token_ms;  // its first chunk with text
  std::vector<double> gaps_ms;           // between its chunks with text
  std::int64_t text_chunks = 0;
  std::optional<std::int64_t> usage_tokens;  // the server's usage.completion_tokens
  std::string error;                         // "" when it succeeded
  std::string answer;                        // its text, the start of it (for `expect`)

  bool ok() const { return error.empty(); }
  // usage_tokens when the server sent them, else the chunks with text.
  std::int64_t tokens() const { return usage_tokens.value_or(text_chunks); }
};

// The p-th percentile (0..100) with linear interpolation between the closest ranks, as
// numpy.percentile computes it (and so vLLM's benchmark_serving). REQUIRES: !values.empty().
double Percentile(std::vector<double> values, double p);

// The figures of the requests of one benchmark that ran for `wall_ms`. Only requests that
// succeeded count towards rates and latencies; every one counts as a request.
BenchmarkFigures ComputeFigures(const std::vector<RequestSample>& samples, double wall_ms);

// What was asked, as BenchmarkFigures::load says it: figures are compared only under the same.
std::string BenchmarkLoad(const BenchmarkSpec& spec);

// The figures a run's are compared with: those the same step recorded in the last succeeded run
// of the same plan on this host. Found by the engine; `run` is "" when there is none.
struct BenchmarkBaseline {
  std::string plan;
  std::string step;
  std::string run;
  std::optional<BenchmarkFigures> figures;
  std::string problem;  // the store could not be read: not compared, and said so
};

struct BenchmarkVerdict {
  bool passed = false;
  // What the check's summary says after "benchmark URL: ": the figures and the baseline when
  // it passed, every bound it broke when it failed.
  std::string detail;
  // The evidence's "baseline": {"run", "tokens_per_s", "ttft_p95_ms", "load"} when compared,
  // else {"run": null, "note": why not}.
  boost::json::object baseline;
};

BenchmarkVerdict JudgeBenchmark(const BenchmarkSpec& spec, const BenchmarkFigures& figures,
                                const BenchmarkBaseline& baseline);

// The quality smoke: the answer to `expect.prompt` must match `expect.matches` (RE2, searched)
// or equal `expect.equals` (leading and trailing whitespace aside). Fails with what it was.
struct AnswerVerdict {
  bool passed = false;
  std::string detail;  // "" when it passed
};
AnswerVerdict JudgeAnswer(const BenchmarkExpect& expect, const std::string& answer);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_BENCHMARK_VERDICT_H_
