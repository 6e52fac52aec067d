// BenchmarkFigures: what a `benchmark` check measured, as deployd commits it in the step's
// evidence (`"benchmark": {…}`) and as deployctl shows it (`status`, `why`, `history`). One
// place for the JSON both ends read, and for the one line that sums the figures up.
//
//   {"url", "model", "load", "requests", "errors", "output_tokens", "token_count",
//    "duration_ms", "tokens_per_s", "request_tokens_per_s_p50", "request_tokens_per_s_min",
//    "ttft_p50_ms", "ttft_p95_ms", "itl_p50_ms", "itl_p95_ms", "first_error"?}
//
// Rates are output tokens per second; `tokens_per_s` is the benchmark's aggregate (all output
// tokens over its wall time), the request rates each request's tokens over its own time. TTFT
// is from a request's start (before it connects) to its first chunk with text; ITL the time
// between chunks with text. A figure no request measured is null. `load` says what was asked
// ("8 requests, concurrency 1, max_tokens 128, prompt_tokens 128"): figures are compared with
// a baseline only under the same load. Plain values, no I/O.
#ifndef DEPLOYD_PROTOCOL_BENCHMARK_WIRE_H_
#define DEPLOYD_PROTOCOL_BENCHMARK_WIRE_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>

namespace deployd {

struct BenchmarkFigures {
  std::string url;
  std::string model;
  std::string load;
  std::int64_t requests = 0;  // made (errors included)
  std::int64_t errors = 0;
  std::int64_t output_tokens = 0;
  // How output tokens were counted: "usage" (the server's usage.completion_tokens), "chunks"
  // (chunks with text, when the server sent no usage), or "usage and chunks" (some of each).
  std::string token_count;
  std::int64_t duration_ms = 0;
  double tokens_per_s = 0;
  std::optional<double> request_tokens_per_s_p50;
  std::optional<double> request_tokens_per_s_min;
  std::optional<double> ttft_p50_ms;
  std::optional<double> ttft_p95_ms;
  std::optional<double> itl_p50_ms;
  std::optional<double> itl_p95_ms;
  std::string first_error;  // "" when none
};

boost::json::object EncodeFigures(const BenchmarkFigures& figures);
// nullopt when `o` is not figures (no "tokens_per_s").
std::optional<BenchmarkFigures> DecodeFigures(const boost::json::object& o);

// "57.3 tokens/s, TTFT p50 120ms p95 310ms, ITL p50 17.2ms p95 19.0ms (8 requests, 1 error)"
std::string FiguresHeadline(const BenchmarkFigures& figures);

// A time in milliseconds for messages: "0.8ms", "17.2ms", "310ms", "2.41s".
std::string FormatMillis(double ms);
// A rate for messages: "57.3".
std::string FormatRate(double tokens_per_s);

}  // namespace deployd

#endif  // DEPLOYD_PROTOCOL_BENCHMARK_WIRE_H_
