#include "plan/benchmark_grammar.h"

#include <re2/re2.h>

#include <array>
#include <charconv>
#include <string>
#include <string_view>

#include "plan/http_check_grammar.h"

namespace deployd {
namespace {

constexpr std::array<std::string_view, 14> kBenchmarkKeys = {
    "url",         "model",  "api",        "prompts",  "prompt_tokens", "max_tokens", "requests",
    "concurrency", "stream", "ignore_eos", "at_least", "at_most",       "regression", "expect"};
constexpr std::array<std::string_view, 2> kAtLeastKeys = {"tokens_per_s", "request_tokens_per_s"};
constexpr std::array<std::string_view, 5> kAtMostKeys = {"ttft_p50", "ttft_p95", "itl_p50",
                                                         "itl_p95", "errors"};
constexpr std::array<std::string_view, 2> kRegressionKeys = {"tokens_per_s", "ttft_p95"};
constexpr std::array<std::string_view, 4> kExpectKeys = {"prompt", "matches", "equals",
                                                         "max_tokens"};

// Bounds that keep one benchmark's work and memory in proportion (each chunk's time is kept).
constexpr std::int64_t kMaxRequests = 10000;
constexpr std::int64_t kMaxConcurrency = 256;
constexpr std::int64_t kMaxTokens = 1 << 20;
constexpr std::int64_t kMaxPromptTokens = 1 << 17;
constexpr std::int64_t kMaxExpectTokens = 4096;

// A plain decimal ("50", "57.5"); nothing else reads as a number here.
std::optional<double> ParseDecimal(std::string_view s) {
  if (s.empty() || s.find_first_not_of("0123456789.") != std::string_view::npos) return {};
  double value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

std::optional<double> Rate(FieldReader& in, const Field& e) {
  std::optional<std::string> text = e.value.IsScalar() ? in.String(e) : std::nullopt;
  std::optional<double> value = text ? ParseDecimal(*text) : std::nullopt;
  if (!value || *value <= 0) {
    if (text || !e.value.IsScalar())
      in.Error(ValuePos(e), Quoted(e.name) + " must be a number above 0 (e.g. 50 or 57.5)");
    return std::nullopt;
  }
  return value;
}

// "10%" as 0.1, at most `max_percent`.
std::optional<double> Percentage(FieldReader& in, const Field& e, double max_percent) {
  std::optional<std::string> text = e.value.IsScalar() ? in.String(e) : std::nullopt;
  if (!text) {
    if (!e.value.IsScalar())
      in.Error(ValuePos(e), Quoted(e.name) + " must be a percentage (e.g. 10%)");
    return std::nullopt;
  }
  std::optional<double> value =
      text->ends_with('%') ? ParseDecimal(std::string_view(*text).substr(0, text->size() - 1))
                           : std::nullopt;
  if (!value) {
    in.Error(ValuePos(e), "invalid percentage " + Quoted(*text) + " (expected e.g. 10% or 2.5%)");
    return std::nullopt;
  }
  if (*value <= 0 || *value >= max_percent) {
    in.Error(ValuePos(e), Quoted(e.name) + " must be above 0% and below " +
                              std::to_string(static_cast<int>(max_percent)) + "%");
    return std::nullopt;
  }
  return *value / 100;
}

// The endpoint: a server's address alone (http://HOST:PORT, or …/v1) means its completions.
std::string Endpoint(const std::string& url, bool chat) {
  std::size_t authority = url.find("://") + 3;
  std::size_t slash = url.find('/', authority);
  std::string path = slash == std::string::npos ? "" : url.substr(slash);
  std::string base = url.substr(0, slash);
  const char* tail = chat ? "/v1/chat/completions" : "/v1/completions";
  if (path.empty() || path == "/") return base + tail;
  if (path == "/v1" || path == "/v1/") return base + tail;
  return url;
}

void ReadLoad(FieldReader& in, const Fields& f, BenchmarkSpec& spec) {
  if (const Field* e = f.Get("api")) {
    std::optional<std::string> api = in.String(*e);
    if (api == "chat" || api == "completions") {
      spec.chat = *api == "chat";
    } else if (api) {
      in.Error(ValuePos(*e), "'api' must be completions or chat");
    }
  }
  const Field* prompts = f.Get("prompts");
  const Field* prompt_tokens = f.Get("prompt_tokens");
  if (prompts && prompt_tokens)
    in.Error(PosOf(prompt_tokens->key), "'prompts' and 'prompt_tokens' cannot be used together");
  if (prompts) {
    for (const auto& [prompt, pos] : in.StringList(*prompts)) {
      if (prompt.empty()) in.Error(pos, "a prompt must not be empty");
      spec.prompts.push_back(prompt);
    }
    if (prompts->value.IsSequence() && prompts->value.size() == 0)
      in.Error(ValuePos(*prompts), "'prompts' must not be an empty list");
  }
  if (prompt_tokens)
    spec.prompt_tokens =
        static_cast<int>(in.Integer(*prompt_tokens, 1, kMaxPromptTokens).value_or(1));
  if (const Field* e = f.Get("max_tokens"))
    spec.max_tokens = static_cast<int>(in.Integer(*e, 1, kMaxTokens).value_or(1));
  if (const Field* e = f.Get("requests"))
    spec.requests = static_cast<int>(in.Integer(*e, 1, kMaxRequests).value_or(1));
  if (const Field* e = f.Get("concurrency")) {
    std::optional<std::int64_t> c = in.Integer(*e, 1, kMaxConcurrency);
    spec.concurrency = static_cast<int>(c.value_or(1));
    if (c && *c > spec.requests)
      in.Error(ValuePos(*e), "'concurrency' (" + std::to_string(*c) + ") must not exceed " +
                                 "'requests' (" + std::to_string(spec.requests) + ")");
  }
  if (const Field* e = f.Get("stream"); e && in.Bool(*e) == false)
    in.Error(ValuePos(*e),
             "'stream' must be true: time to first token is seen only on a streamed answer");
  if (const Field* e = f.Get("ignore_eos")) spec.ignore_eos = in.Bool(*e).value_or(false);
}

void ReadBounds(FieldReader& in, const Fields& f, BenchmarkSpec& spec) {
  if (const Field* e = f.Get("at_least")) {
    if (!e->value.IsMap()) {
      in.Error(ValuePos(*e),
               "'at_least' must be a map with 'tokens_per_s' or "
               "'request_tokens_per_s'");
    } else {
      Fields m = in.ReadMap(e->value, kAtLeastKeys, "in 'at_least'");
      if (const Field* x = m.Get("tokens_per_s")) spec.min_tokens_per_s = Rate(in, *x);
      if (const Field* x = m.Get("request_tokens_per_s"))
        spec.min_request_tokens_per_s = Rate(in, *x);
    }
  }
  if (const Field* e = f.Get("at_most")) {
    if (!e->value.IsMap()) {
      in.Error(ValuePos(*e),
               "'at_most' must be a map of ttft_p50, ttft_p95, itl_p50, itl_p95 "
               "and errors");
    } else {
      Fields m = in.ReadMap(e->value, kAtMostKeys, "in 'at_most'");
      if (const Field* x = m.Get("ttft_p50")) spec.max_ttft_p50 = in.DurationValue(*x);
      if (const Field* x = m.Get("ttft_p95")) spec.max_ttft_p95 = in.DurationValue(*x);
      if (const Field* x = m.Get("itl_p50")) spec.max_itl_p50 = in.DurationValue(*x);
      if (const Field* x = m.Get("itl_p95")) spec.max_itl_p95 = in.DurationValue(*x);
      if (const Field* x = m.Get("errors"))
        spec.max_errors = static_cast<int>(in.Integer(*x, 0, kMaxRequests).value_or(0));
    }
  }
  if (const Field* e = f.Get("regression")) {
    if (e->value.IsMap()) {
      Fields m = in.ReadMap(e->value, kRegressionKeys, "in 'regression'");
      if (const Field* x = m.Get("tokens_per_s"))
        spec.regression_tokens_per_s = Percentage(in, *x, 100);
      if (const Field* x = m.Get("ttft_p95")) spec.regression_ttft_p95 = Percentage(in, *x, 1000);
    } else if (e->value.IsScalar()) {
      spec.regression_tokens_per_s = Percentage(in, *e, 100);
    } else {
      in.Error(ValuePos(*e),
               "'regression' must be a percentage (e.g. 10%) or a map with "
               "'tokens_per_s' and 'ttft_p95'");
    }
  }
}

void ReadExpect(FieldReader& in, const Field& e, BenchmarkSpec& spec) {
  if (!e.value.IsMap()) {
    in.Error(ValuePos(e), "'expect' must be a map with 'prompt' and 'matches' or 'equals'");
    return;
  }
  Fields m = in.ReadMap(e.value, kExpectKeys, "in 'expect'");
  BenchmarkExpect expect;
  if (const Field* p = m.Get("prompt")) {
    expect.prompt = in.NonEmptyString(*p).value_or("");
  } else {
    in.Error(PosOf(e.value), "missing required key 'prompt' in 'expect'");
  }
  const Field* matches = m.Get("matches");
  const Field* equals = m.Get("equals");
  if (matches && equals) {
    in.Error(PosOf(equals->key), "'expect' takes 'matches' or 'equals', not both");
  } else if (matches) {
    std::optional<std::string> pattern = in.Regex(matches->value, ValuePos(*matches), "matches");
    // The answer is searched with RE2: what it cannot compile (a back-reference, lookaround)
    // is refused here rather than when the server has been benchmarked.
    RE2 compiled(pattern.value_or(""), RE2::Quiet);
    if (pattern && !compiled.ok())
      in.Error(ValuePos(*matches), "invalid regex " + Quoted(*pattern) + ": " + compiled.error());
    expect.matches = pattern.value_or("");
  } else if (equals) {
    expect.equals = in.String(*equals).value_or("");
  } else {
    in.Error(PosOf(e.value), "'expect' needs 'matches' or 'equals'");
  }
  if (const Field* x = m.Get("max_tokens"))
    expect.max_tokens = static_cast<int>(in.Integer(*x, 1, kMaxExpectTokens).value_or(1));
  spec.expect = std::move(expect);
}

}  // namespace

void ReadBenchmarkCheck(FieldReader& in, const Field& e, Check& check) {
  check.timeout = kBenchmarkTimeout;
  const YAML::Node& v = e.value;
  if (!v.IsMap()) {
    in.Error(ValuePos(e), "'benchmark' must be a map with 'url' and 'model'");
    return;
  }
  Fields f = in.ReadMap(v, kBenchmarkKeys, "in 'benchmark'");
  BenchmarkSpec& spec = check.benchmark;
  ReadLoad(in, f, spec);
  if (const Field* url = f.Get("url")) {
    std::optional<std::string> text = in.String(*url);
    if (text) text = ReadHttpUrl(in, *text, ValuePos(*url), "benchmark");
    if (text) spec.url = Endpoint(*text, spec.chat);
  } else {
    in.Error(PosOf(v), "missing required key 'url' in 'benchmark'");
  }
  if (const Field* model = f.Get("model")) {
    spec.model = in.NonEmptyString(*model).value_or("");
  } else {
    in.Error(PosOf(v), "missing required key 'model' in 'benchmark'");
  }
  ReadBounds(in, f, spec);
  if (const Field* x = f.Get("expect")) ReadExpect(in, *x, spec);
}

}  // namespace deployd
