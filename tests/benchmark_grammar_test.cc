// The `benchmark` check's plan keys (plan/benchmark_grammar.h): what a correct one becomes, and
// every mistake's message with its position.
#include <catch2/catch.hpp>
#include <string>
#include <string_view>

#include "plan/plan_parser.h"
#include "plan_problems.h"

using namespace deployd;
using namespace std::chrono_literals;
using deployd::testing::Problems;

namespace {

// A plan whose one step verifies with `check` (indented as a list item under verify).
std::string WithCheck(std::string_view check) {
  return "version: 1\nname: t\nsteps:\n  - id: s\n    run: 'true'\n    verify:\n" +
         std::string(check);
}

// A plan with a step for each check (a step has at most one benchmark): step N's check starts
// on line 3 + 4N (N from 1).
std::string StepPerCheck(std::initializer_list<std::string_view> checks) {
  std::string plan = "version: 1\nname: t\nsteps:\n";
  int n = 0;
  for (std::string_view check : checks)
    plan += "  - id: s" + std::to_string(++n) + "\n    run: 'true'\n    verify:\n      - " +
            std::string(check) + "\n";
  return plan;
}

}  // namespace

TEST_CASE("benchmark: a full check parses into its values", "[benchmark_grammar]") {
  const std::string plan = WithCheck(R"(      - benchmark:
          url: http://127.0.0.1:8000
          model: Kimi-K2.5-NVFP4
          prompt_tokens: 512
          max_tokens: 256
          requests: 8
          concurrency: 2
          stream: true
          ignore_eos: true
          at_least: {tokens_per_s: 50, request_tokens_per_s: 20.5}
          at_most: {ttft_p50: 500ms, ttft_p95: 2s, itl_p50: 30ms, itl_p95: 60ms, errors: 1}
          regression: {tokens_per_s: 10%, ttft_p95: 25%}
          expect: {prompt: 'The capital of France is', matches: '(?i)paris', max_tokens: 8}
        timeout: 10m
)");
  INFO(Problems(plan));
  ParseResult r = ParsePlan(plan, "plan.yaml", {});
  REQUIRE(r.plan.has_value());
  const Check& c = r.plan->steps[0].verify[0];
  CHECK(c.kind == CheckKind::kBenchmark);
  CHECK(c.timeout == 10min);
  const BenchmarkSpec& b = c.benchmark;
  CHECK(b.url == "http://127.0.0.1:8000/v1/completions");
  CHECK(b.model == "Kimi-K2.5-NVFP4");
  CHECK_FALSE(b.chat);
  CHECK(b.prompts.empty());
  CHECK(b.prompt_tokens == 512);
  CHECK(b.max_tokens == 256);
  CHECK(b.requests == 8);
  CHECK(b.concurrency == 2);
  CHECK(b.ignore_eos);
  CHECK(*b.min_tokens_per_s == 50);
  CHECK(*b.min_request_tokens_per_s == 20.5);
  CHECK(*b.max_ttft_p50 == 500ms);
  CHECK(*b.max_ttft_p95 == 2s);
  CHECK(*b.max_itl_p50 == 30ms);
  CHECK(*b.max_itl_p95 == 60ms);
  CHECK(b.max_errors == 1);
  CHECK(*b.regression_tokens_per_s == Approx(0.1));
  CHECK(*b.regression_ttft_p95 == Approx(0.25));
  REQUIRE(b.expect.has_value());
  CHECK(b.expect->prompt == "The capital of France is");
  CHECK(b.expect->matches == "(?i)paris");
  CHECK_FALSE(b.expect->equals.has_value());
  CHECK(b.expect->max_tokens == 8);
}

TEST_CASE("benchmark: defaults, the endpoint, chat and prompts", "[benchmark_grammar]") {
  ParseResult r =
      ParsePlan(WithCheck(R"(      - benchmark: {url: 'http://[::1]:8000/v1', model: m, api: chat,
                     prompts: [Hello, 'Tell me a story'], regression: 2.5%,
                     expect: {prompt: '2+2=', equals: '4'}}
      - http: http://127.0.0.1:8000/health
)"),
                "plan.yaml", {});
  REQUIRE(r.plan.has_value());
  const Check& c = r.plan->steps[0].verify[0];
  CHECK(c.timeout == 5min);
  const BenchmarkSpec& b = c.benchmark;
  CHECK(b.url == "http://[::1]:8000/v1/chat/completions");
  CHECK(b.chat);
  CHECK(b.prompts == std::vector<std::string>{"Hello", "Tell me a story"});
  CHECK(b.max_tokens == 128);
  CHECK(b.requests == 8);
  CHECK(b.concurrency == 1);
  CHECK(b.max_errors == 0);
  CHECK_FALSE(b.min_tokens_per_s.has_value());
  CHECK(*b.regression_tokens_per_s == Approx(0.025));
  CHECK_FALSE(b.regression_ttft_p95.has_value());
  CHECK(b.expect->equals == "4");
  CHECK(b.expect->max_tokens == 16);
  // A full path is kept as written.
  r = ParsePlan(WithCheck("      - benchmark: {url: 'http://h:1/custom/completions', model: m}\n"),
                "plan.yaml", {});
  REQUIRE(r.plan.has_value());
  CHECK(r.plan->steps[0].verify[0].benchmark.url == "http://h:1/custom/completions");
  r = ParsePlan(WithCheck("      - benchmark: {url: 'http://h:1/', model: m}\n"), "plan.yaml", {});
  REQUIRE(r.plan.has_value());
  CHECK(r.plan->steps[0].verify[0].benchmark.url == "http://h:1/v1/completions");
}

TEST_CASE("benchmark: plan errors", "[benchmark_grammar]") {
  CHECK(Problems(StepPerCheck({
            "benchmark: http://127.0.0.1:8000",
            "benchmark: {model: m}",
            "benchmark: {url: 'https://h/', model: ''}",
            "benchmark: {url: 'http://h/', model: m, api: grpc, prompts: [], prompt_tokens: 5}",
            "benchmark: {url: 'http://h/', model: m, requests: 2, concurrency: 4, stream: false}",
            "benchmark: {url: 'http://h/', model: m, requests: 0, max_tokens: 9999999, "
            "prompts: ['']}",
            "benchmark: {url: 'http://h/', model: m, speed: 5}",
        })) == R"(7:20: 'benchmark' must be a map with 'url' and 'model'
11:20: missing required key 'url' in 'benchmark'
15:26: https is not supported in 'benchmark' checks (probe the server on loopback over http://)
15:47: 'model' must not be empty
19:54: 'api' must be completions or chat
19:69: 'prompts' must not be an empty list
19:73: 'prompts' and 'prompt_tokens' cannot be used together
23:75: 'concurrency' (4) must not exceed 'requests' (2)
23:86: 'stream' must be true: time to first token is seen only on a streamed answer
27:59: 'requests' must be between 1 and 10000
27:74: 'max_tokens' must be between 1 and 1048576
27:93: a prompt must not be empty
31:49: unknown key 'speed' in 'benchmark'
)");
}

TEST_CASE("benchmark: errors in the bounds and the quality smoke", "[benchmark_grammar]") {
  CHECK(Problems(StepPerCheck({
            "benchmark: {url: 'http://h/', model: m, at_least: {tokens_per_s: fast, ttft_p95: 2s}}",
            "benchmark: {url: 'http://h/', model: m, at_most: {ttft_p95: 2, errors: -1}}",
            "benchmark: {url: 'http://h/', model: m, regression: 10}",
            "benchmark: {url: 'http://h/', model: m, at_least: 50, at_most: [1]}",
            "benchmark: {url: 'http://h/', model: m, regression: {tokens_per_s: 100%, "
            "ttft_p95: 0%}}",
            "benchmark: {url: 'http://h/', model: m, regression: [10%]}",
            "benchmark: {url: 'http://h/', model: m, expect: {matches: '(', equals: x}}",
            "benchmark: {url: 'http://h/', model: m, expect: {prompt: q, matches: 'x\\cAy'}}",
            "benchmark: {url: 'http://h/', model: m, expect: {prompt: q}}",
            "benchmark: {url: 'http://h/', model: m, expect: 'paris'}",
        })) == R"(7:74: 'tokens_per_s' must be a number above 0 (e.g. 50 or 57.5)
7:80: unknown key 'ttft_p95' in 'at_least'
11:69: invalid duration '2' (expected e.g. 500ms, 15s, 10m, 8h)
11:80: 'errors' must be between 0 and 10000
15:61: invalid percentage '10' (expected e.g. 10% or 2.5%)
19:59: 'at_least' must be a map with 'tokens_per_s' or 'request_tokens_per_s'
19:72: 'at_most' must be a map of ttft_p50, ttft_p95, itl_p50, itl_p95 and errors
23:76: 'tokens_per_s' must be above 0% and below 100%
23:92: 'ttft_p95' must be above 0% and below 1000%
27:61: 'regression' must be a percentage (e.g. 10%) or a map with 'tokens_per_s' and 'ttft_p95'
31:57: missing required key 'prompt' in 'expect'
31:72: 'expect' takes 'matches' or 'equals', not both
35:78: invalid regex 'x\cAy': invalid escape sequence: \c
39:57: 'expect' needs 'matches' or 'equals'
43:57: 'expect' must be a map with 'prompt' and 'matches' or 'equals'
)");
  CHECK(Problems(WithCheck(R"(      - benchmark: {url: 'http://h/', model: m}
      - benchmark: {url: 'http://h/', model: m}
)")) == "8:9: a step has at most one 'benchmark' check (its figures are the step's)\n");
}

TEST_CASE("benchmark: only in a step's verify", "[benchmark_grammar]") {
  CHECK(Problems(R"(version: 1
name: t
preflight:
  - benchmark: {url: 'http://h/', model: m}
steps:
  - id: s
    run: 'true'
    skip_if:
      - benchmark: {url: 'http://h/', model: m}
)") == R"(4:5: 'benchmark' is only allowed in a step's 'verify' (it loads the server with requests)
9:9: 'benchmark' is only allowed in a step's 'verify' (it loads the server with requests)
)");
}
