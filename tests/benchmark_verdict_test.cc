// The pure half of the benchmark check (checks/benchmark_verdict.h, protocol/benchmark_wire.h):
// percentiles, figures from what each request saw, and every verdict's message.
#include "checks/benchmark_verdict.h"

#include <catch2/catch.hpp>
#include <set>
#include <sstream>

#include "checks/benchmark_probe.h"
#include "protocol/benchmark_wire.h"

using namespace deployd;
using namespace std::chrono_literals;

namespace {

// A request that started at `start` and streamed `tokens` chunks `gap` ms apart after `ttft`.
RequestSample Streamed(double start, double ttft, int tokens, double gap, bool usage = true) {
  RequestSample s;
  s.start_ms = start;
  s.first_token_ms = start + ttft;
  for (int i = 1; i < tokens; ++i) s.gaps_ms.push_back(gap);
  s.text_chunks = tokens;
  if (usage) s.usage_tokens = tokens;
  s.end_ms = start + ttft + gap * (tokens - 1);
  return s;
}

RequestSample Failed(const std::string& error) {
  RequestSample s;
  s.error = error;
  s.end_ms = 5;
  return s;
}

BenchmarkSpec Spec() {
  BenchmarkSpec spec;
  spec.url = "http://127.0.0.1:8000/v1/completions";
  spec.model = "kimi";
  spec.requests = 4;
  spec.max_tokens = 100;
  spec.prompt_tokens = 32;
  return spec;
}

BenchmarkFigures Figures(double rate, double ttft_p95 = 300) {
  BenchmarkFigures f;
  f.load = BenchmarkLoad(Spec());
  f.requests = 4;
  f.output_tokens = 400;
  f.tokens_per_s = rate;
  f.request_tokens_per_s_p50 = rate;
  f.request_tokens_per_s_min = rate * 0.9;
  f.ttft_p50_ms = 120;
  f.ttft_p95_ms = ttft_p95;
  f.itl_p50_ms = 17.2;
  f.itl_p95_ms = 19.04;
  return f;
}

BenchmarkBaseline NoBaseline() {
  BenchmarkBaseline b;
  b.plan = "kimi";
  b.step = "benchmark";
  return b;
}

BenchmarkBaseline BaselineOf(double rate, double ttft_p95 = 300) {
  BenchmarkBaseline b = NoBaseline();
  b.run = "kimi-3";
  b.figures = Figures(rate, ttft_p95);
  return b;
}

}  // namespace

TEST_CASE("percentiles interpolate between ranks, as numpy does", "[benchmark]") {
  std::vector<double> ten = {10, 9, 8, 7, 6, 5, 4, 3, 2, 1};
  CHECK(Percentile(ten, 50) == Approx(5.5));
  CHECK(Percentile(ten, 95) == Approx(9.55));
  CHECK(Percentile(ten, 0) == 1);
  CHECK(Percentile(ten, 100) == 10);
  CHECK(Percentile({42}, 95) == 42);
  CHECK(Percentile({100, 200}, 95) == Approx(195));
}

TEST_CASE("figures: rates over the wall time, latencies of the requests that answered",
          "[benchmark]") {
  // Two requests one after the other: 50 tokens each, 20 ms apart after a 100 ms TTFT.
  std::vector<RequestSample> samples = {Streamed(0, 100, 50, 20), Streamed(1100, 100, 50, 20)};
  BenchmarkFigures f = ComputeFigures(samples, 2180);
  CHECK(f.requests == 2);
  CHECK(f.errors == 0);
  CHECK(f.output_tokens == 100);
  CHECK(f.token_count == "usage");
  CHECK(f.duration_ms == 2180);
  CHECK(f.tokens_per_s == Approx(100 * 1000.0 / 2180));
  CHECK(*f.request_tokens_per_s_p50 == Approx(50 * 1000.0 / 1080));
  CHECK(*f.ttft_p50_ms == Approx(100));
  CHECK(*f.ttft_p95_ms == Approx(100));
  CHECK(*f.itl_p50_ms == Approx(20));
  CHECK(f.first_error.empty());

  // Without usage the chunks are counted; a failed request counts as a request and an error.
  samples = {Streamed(0, 50, 10, 10, false), Failed("status 503: overloaded"),
             Streamed(0, 70, 30, 10)};
  f = ComputeFigures(samples, 400);
  CHECK(f.requests == 3);
  CHECK(f.errors == 1);
  CHECK(f.first_error == "status 503: overloaded");
  CHECK(f.output_tokens == 40);
  CHECK(f.token_count == "usage and chunks");
  CHECK(*f.ttft_p50_ms == Approx(60));
  CHECK(*f.request_tokens_per_s_min == Approx(10 * 1000.0 / 140));

  // Nothing answered: no latencies at all.
  f = ComputeFigures({Failed("connection refused"), Failed("connection refused")}, 10);
  CHECK(f.errors == 2);
  CHECK(f.tokens_per_s == 0);
  CHECK_FALSE(f.ttft_p95_ms.has_value());
  CHECK_FALSE(f.itl_p95_ms.has_value());
  CHECK_FALSE(f.request_tokens_per_s_min.has_value());
}

TEST_CASE("figures: the JSON both ends read, and the headline", "[benchmark]") {
  BenchmarkFigures f = Figures(57.333);
  f.errors = 1;
  f.first_error = "status 500: boom";
  std::optional<BenchmarkFigures> back = DecodeFigures(EncodeFigures(f));
  REQUIRE(back.has_value());
  CHECK(back->tokens_per_s == Approx(57.33));
  CHECK(back->load == "4 requests, concurrency 1, max_tokens 100, prompt_tokens 32");
  CHECK(back->first_error == "status 500: boom");
  CHECK(*back->itl_p95_ms == Approx(19.04));
  CHECK(FiguresHeadline(f) ==
        "57.3 tokens/s, TTFT p50 120ms p95 300ms, ITL p50 17.2ms p95 19.0ms (4 requests, 1 error)");
  CHECK_FALSE(DecodeFigures(boost::json::object{{"url", "x"}}).has_value());
  BenchmarkFigures none;
  none.requests = 1;
  none.errors = 1;
  CHECK(FiguresHeadline(none) == "0.0 tokens/s (1 request, 1 error)");
  CHECK(FormatMillis(0.84) == "0.8ms");
  CHECK(FormatMillis(310.4) == "310ms");
  CHECK(FormatMillis(2414) == "2.41s");
}

TEST_CASE("the load a benchmark asks for, as figures name it", "[benchmark]") {
  BenchmarkSpec spec = Spec();
  CHECK(BenchmarkLoad(spec) == "4 requests, concurrency 1, max_tokens 100, prompt_tokens 32");
  spec.chat = true;
  spec.prompts = {"a", "b"};
  spec.concurrency = 2;
  spec.ignore_eos = true;
  CHECK(BenchmarkLoad(spec) ==
        "chat, 4 requests, concurrency 2, max_tokens 100, 2 prompts, "
        "ignore_eos");
}

TEST_CASE("verdict: the first run passes and says it sets the baseline", "[benchmark]") {
  BenchmarkVerdict v = JudgeBenchmark(Spec(), Figures(57.3), NoBaseline());
  CHECK(v.passed);
  CHECK(v.detail ==
        "57.3 tokens/s, TTFT p50 120ms p95 300ms, ITL p50 17.2ms p95 19.0ms (4 requests); no "
        "earlier succeeded run of plan 'kimi' measured step 'benchmark': this run sets the "
        "baseline");
  CHECK(v.baseline.at("run").is_null());
  CHECK(v.baseline.at("note") ==
        "no earlier succeeded run of plan 'kimi' measured step "
        "'benchmark': this run sets the baseline");
}

TEST_CASE("verdict: a regression names both figures", "[benchmark]") {
  BenchmarkSpec spec = Spec();
  spec.regression_tokens_per_s = 0.1;
  BenchmarkVerdict slower = JudgeBenchmark(spec, Figures(40.1), BaselineOf(57.3));
  CHECK_FALSE(slower.passed);
  CHECK(slower.detail ==
        "40.1 tokens/s is 30.0% below 57.3 tokens/s, the baseline of run kimi-3 (at most 10% "
        "allowed)");
  CHECK(slower.baseline.at("run") == "kimi-3");
  CHECK(slower.baseline.at("change_tokens_per_s").as_double() == Approx(-0.3002));

  BenchmarkVerdict within = JudgeBenchmark(spec, Figures(54.0), BaselineOf(57.3));
  CHECK(within.passed);
  CHECK(within.detail ==
        "54.0 tokens/s, TTFT p50 120ms p95 300ms, ITL p50 17.2ms p95 19.0ms (4 requests); run "
        "kimi-3, the baseline, made 57.3 tokens/s (-5.8%)");
  BenchmarkVerdict faster = JudgeBenchmark(spec, Figures(60.0), BaselineOf(57.3));
  CHECK(faster.detail.ends_with("made 57.3 tokens/s (+4.7%)"));

  // Without `regression` the baseline is reported, never judged.
  CHECK(JudgeBenchmark(Spec(), Figures(10), BaselineOf(57.3)).passed);

  spec.regression_ttft_p95 = 0.25;
  BenchmarkVerdict late = JudgeBenchmark(spec, Figures(57.3, 450), BaselineOf(57.3, 300));
  CHECK_FALSE(late.passed);
  CHECK(late.detail ==
        "TTFT p95 450ms is 50.0% above 300ms, the baseline of run kimi-3 (at most 25% allowed)");
}

TEST_CASE("verdict: a baseline of another load, or none that can be read, is not compared",
          "[benchmark]") {
  BenchmarkSpec spec = Spec();
  spec.regression_tokens_per_s = 0.1;
  BenchmarkBaseline other = BaselineOf(100);
  other.figures->load = "8 requests, concurrency 4, max_tokens 100, prompt_tokens 32";
  BenchmarkVerdict v = JudgeBenchmark(spec, Figures(20), other);
  CHECK(v.passed);
  CHECK(
      v.detail.ends_with("; run kimi-3, the baseline, measured another load (8 requests, "
                         "concurrency 4, max_tokens 100, prompt_tokens 32): not compared; this "
                         "run sets the baseline"));
  BenchmarkBaseline broken = NoBaseline();
  broken.problem = "state.db: disk I/O error";
  v = JudgeBenchmark(spec, Figures(20), broken);
  CHECK(v.passed);
  CHECK(
      v.detail.ends_with("; the baseline could not be read (state.db: disk I/O error): not "
                         "compared"));
}

TEST_CASE("verdict: absolute bounds, each broken one said", "[benchmark]") {
  BenchmarkSpec spec = Spec();
  spec.min_tokens_per_s = 50;
  spec.min_request_tokens_per_s = 45;
  spec.max_ttft_p50 = 100ms;
  spec.max_ttft_p95 = 2s;
  spec.max_itl_p95 = 15ms;
  BenchmarkVerdict v = JudgeBenchmark(spec, Figures(42.15, 2410), NoBaseline());
  CHECK_FALSE(v.passed);
  CHECK(v.detail ==
        "42.1 tokens/s is below the required 50.0 tokens/s; the slowest request made 37.9 "
        "tokens/s, below the required 45.0 tokens/s per request; TTFT p50 120ms is above the "
        "allowed 100ms; TTFT p95 2.41s is above the allowed 2s; ITL p95 19.0ms is above the "
        "allowed 15ms");
  spec = Spec();
  spec.min_tokens_per_s = 50;
  CHECK(JudgeBenchmark(spec, Figures(50), NoBaseline()).passed);
}

TEST_CASE("verdict: failed requests", "[benchmark]") {
  BenchmarkFigures f = Figures(57.3);
  f.errors = 2;
  f.first_error = "status 500: EngineCore encountered an issue";
  BenchmarkVerdict v = JudgeBenchmark(Spec(), f, NoBaseline());
  CHECK_FALSE(v.passed);
  CHECK(v.detail ==
        "2 of 4 requests failed (at most 0 allowed); the first: status 500: "
        "EngineCore encountered an issue");
  BenchmarkSpec tolerant = Spec();
  tolerant.max_errors = 2;
  CHECK(JudgeBenchmark(tolerant, f, NoBaseline()).passed);

  // Not one answer: nothing was measured, whatever at_most.errors allows.
  tolerant.max_errors = 4;
  tolerant.min_tokens_per_s = 50;
  tolerant.regression_tokens_per_s = 0.1;
  BenchmarkFigures none =
      ComputeFigures({Failed("connection refused"), Failed("connection refused"),
                      Failed("connection refused"), Failed("connection refused")},
                     20);
  none.load = BenchmarkLoad(Spec());
  v = JudgeBenchmark(tolerant, none, BaselineOf(57.3));
  CHECK_FALSE(v.passed);
  CHECK(v.detail == "every request failed (4 of 4); the first: connection refused");
}

TEST_CASE("quality smoke: a pattern or an exact answer", "[benchmark]") {
  BenchmarkExpect expect;
  expect.prompt = "The capital of France is";
  expect.matches = "(?i)\\bparis\\b";
  CHECK(JudgeAnswer(expect, " Paris. It is also").passed);
  AnswerVerdict bad = JudgeAnswer(expect, " zq xv blorp zq xv");
  CHECK_FALSE(bad.passed);
  CHECK(bad.detail ==
        "the answer to \"The capital of France is\" does not match '(?i)\\bparis\\b': \" zq xv "
        "blorp zq xv\"");

  BenchmarkExpect exact;
  exact.prompt = "2+2=";
  exact.equals = "4";
  CHECK(JudgeAnswer(exact, " 4\n").passed);
  AnswerVerdict wrong = JudgeAnswer(exact, " 5");
  CHECK_FALSE(wrong.passed);
  CHECK(wrong.detail == "the answer to \"2+2=\" is \"5\", expected \"4\"");

  BenchmarkExpect broken;
  broken.prompt = "x";
  broken.matches = "(a";
  AnswerVerdict v = JudgeAnswer(broken, "a");
  CHECK_FALSE(v.passed);
  CHECK(v.detail == "invalid regex '(a': missing ): (a");
}

TEST_CASE("synthetic prompts: N words, a different order for each request", "[benchmark]") {
  std::string p0 = SyntheticPrompt(128, 0);
  std::istringstream words(p0);
  int count = 0;
  for (std::string w; words >> w;) ++count;
  CHECK(count == 128);
  std::set<std::string> firsts;
  for (int r = 0; r < 64; ++r) firsts.insert(SyntheticPrompt(4, r).substr(0, 12));
  CHECK(firsts.size() == 64);
  CHECK(SyntheticPrompt(0, 3).empty());
}
