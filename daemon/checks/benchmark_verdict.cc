#include "checks/benchmark_verdict.h"

#include <re2/re2.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "checks/check_text.h"
#include "util/units.h"

namespace deployd {

namespace json = boost::json;

namespace {

// How much of an answer or a prompt a message quotes.
constexpr std::size_t kQuotedBytes = 200;

std::string Percent(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f%%", fraction * 100);
  return text;
}

// "10%" for a bound given as 0.1: as the plan wrote it when it was whole.
std::string BoundPercent(double fraction) {
  double whole = std::round(fraction * 100);
  if (std::fabs(whole - fraction * 100) < 1e-9)
    return std::to_string(static_cast<int>(whole)) + "%";
  return Percent(fraction);
}

std::string Trimmed(const std::string& text) {
  std::size_t begin = text.find_first_not_of(" \t\r\n");
  if (begin == std::string::npos) return "";
  std::size_t end = text.find_last_not_of(" \t\r\n");
  return text.substr(begin, end - begin + 1);
}

std::string QuotedText(const std::string& text) {
  return "\"" + Utf8Excerpt(text, kQuotedBytes) + "\"";
}

// The absolute bounds a figure broke, in the order the plan's keys read.
void JudgeBounds(const BenchmarkSpec& spec, const BenchmarkFigures& f,
                 std::vector<std::string>& broken) {
  const std::int64_t ok = f.requests - f.errors;
  if (ok == 0 || f.errors > spec.max_errors) {
    // Without one answer nothing was measured, whatever `at_most.errors` allows.
    std::string text = ok == 0 ? "every request failed (" + std::to_string(f.errors) + " of " +
                                     std::to_string(f.requests) + ")"
                               : std::to_string(f.errors) + " of " + std::to_string(f.requests) +
                                     " requests failed (at most " +
                                     std::to_string(spec.max_errors) + " allowed)";
    if (!f.first_error.empty()) text += "; the first: " + f.first_error;
    broken.push_back(text);
  }
  if (ok == 0) return;  // the bounds below would only repeat it
  if (spec.min_tokens_per_s && f.tokens_per_s < *spec.min_tokens_per_s)
    broken.push_back(FormatRate(f.tokens_per_s) + " tokens/s is below the required " +
                     FormatRate(*spec.min_tokens_per_s) + " tokens/s");
  if (spec.min_request_tokens_per_s && f.request_tokens_per_s_min &&
      *f.request_tokens_per_s_min < *spec.min_request_tokens_per_s)
    broken.push_back("the slowest request made " + FormatRate(*f.request_tokens_per_s_min) +
                     " tokens/s, below the required " + FormatRate(*spec.min_request_tokens_per_s) +
                     " tokens/s per request");
  auto at_most = [&](const char* name, const std::optional<double>& value,
                     const std::optional<Duration>& bound) {
    if (!bound || !value || *value <= static_cast<double>(bound->count())) return;
    broken.push_back(std::string(name) + " " + FormatMillis(*value) + " is above the allowed " +
                     FormatDuration(*bound));
  };
  at_most("TTFT p50", f.ttft_p50_ms, spec.max_ttft_p50);
  at_most("TTFT p95", f.ttft_p95_ms, spec.max_ttft_p95);
  at_most("ITL p50", f.itl_p50_ms, spec.max_itl_p50);
  at_most("ITL p95", f.itl_p95_ms, spec.max_itl_p95);
}

// Against the baseline: what got worse than `regression` allows goes to `broken`; what the
// comparison found goes to `said` (for a verdict that passes) and `evidence`.
void JudgeRegression(const BenchmarkSpec& spec, const BenchmarkFigures& f,
                     const BenchmarkBaseline& b, std::vector<std::string>& broken,
                     std::string& said, json::object& evidence) {
  if (!b.problem.empty()) {
    evidence = {{"run", nullptr}, {"note", "the baseline could not be read: " + b.problem}};
    said = "the baseline could not be read (" + b.problem + "): not compared";
    return;
  }
  if (!b.figures) {
    said = "no earlier succeeded run of plan '" + b.plan + "' measured step '" + b.step +
           "': this run sets the baseline";
    evidence = {{"run", nullptr}, {"note", said}};
    return;
  }
  const BenchmarkFigures& base = *b.figures;
  if (base.load != f.load) {
    said = "run " + b.run + ", the baseline, measured another load (" + base.load +
           "): not compared; this run sets the baseline";
    evidence = {{"run", b.run}, {"load", base.load}, {"note", said}};
    return;
  }
  evidence = {{"run", b.run},
              {"tokens_per_s", base.tokens_per_s},
              {"ttft_p95_ms", base.ttft_p95_ms ? json::value(*base.ttft_p95_ms) : nullptr},
              {"load", base.load}};
  if (f.requests == f.errors || base.tokens_per_s <= 0) {
    said = "run " + b.run + ", the baseline, made " + FormatRate(base.tokens_per_s) + " tokens/s";
    return;
  }
  double change = f.tokens_per_s / base.tokens_per_s - 1;
  evidence["change_tokens_per_s"] = std::round(change * 10000) / 10000;
  said = "run " + b.run + ", the baseline, made " + FormatRate(base.tokens_per_s) + " tokens/s (" +
         (change >= 0 ? "+" : "") + Percent(change) + ")";
  if (spec.regression_tokens_per_s && -change > *spec.regression_tokens_per_s)
    broken.push_back(FormatRate(f.tokens_per_s) + " tokens/s is " + Percent(-change) + " below " +
                     FormatRate(base.tokens_per_s) + " tokens/s, the baseline of run " + b.run +
                     " (at most " + BoundPercent(*spec.regression_tokens_per_s) + " allowed)");
  if (spec.regression_ttft_p95 && f.ttft_p95_ms && base.ttft_p95_ms && *base.ttft_p95_ms > 0) {
    double rise = *f.ttft_p95_ms / *base.ttft_p95_ms - 1;
    if (rise > *spec.regression_ttft_p95)
      broken.push_back("TTFT p95 " + FormatMillis(*f.ttft_p95_ms) + " is " + Percent(rise) +
                       " above " + FormatMillis(*base.ttft_p95_ms) + ", the baseline of run " +
                       b.run + " (at most " + BoundPercent(*spec.regression_ttft_p95) +
                       " allowed)");
  }
}

}  // namespace

double Percentile(std::vector<double> values, double p) {
  std::sort(values.begin(), values.end());
  double rank = p / 100 * static_cast<double>(values.size() - 1);
  std::size_t below = static_cast<std::size_t>(std::floor(rank));
  std::size_t above = std::min(below + 1, values.size() - 1);
  double weight = rank - static_cast<double>(below);
  return values[below] + (values[above] - values[below]) * weight;
}

BenchmarkFigures ComputeFigures(const std::vector<RequestSample>& samples, double wall_ms) {
  BenchmarkFigures f;
  f.requests = static_cast<std::int64_t>(samples.size());
  f.duration_ms = static_cast<std::int64_t>(std::llround(wall_ms));
  std::vector<double> rates, ttfts, gaps;
  int with_usage = 0, without_usage = 0;
  for (const RequestSample& s : samples) {
    if (!s.ok()) {
      ++f.errors;
      if (f.first_error.empty()) f.first_error = s.error;
      continue;
    }
    (s.usage_tokens ? with_usage : without_usage)++;
    f.output_tokens += s.tokens();
    if (s.end_ms > s.start_ms)
      rates.push_back(static_cast<double>(s.tokens()) * 1000 / (s.end_ms - s.start_ms));
    if (s.first_token_ms) ttfts.push_back(*s.first_token_ms - s.start_ms);
    gaps.insert(gaps.end(), s.gaps_ms.begin(), s.gaps_ms.end());
  }
  f.token_count = with_usage == 0 ? "chunks" : without_usage == 0 ? "usage" : "usage and chunks";
  if (wall_ms > 0) f.tokens_per_s = static_cast<double>(f.output_tokens) * 1000 / wall_ms;
  if (!rates.empty()) {
    f.request_tokens_per_s_p50 = Percentile(rates, 50);
    f.request_tokens_per_s_min = *std::min_element(rates.begin(), rates.end());
  }
  if (!ttfts.empty()) {
    f.ttft_p50_ms = Percentile(ttfts, 50);
    f.ttft_p95_ms = Percentile(ttfts, 95);
  }
  if (!gaps.empty()) {
    f.itl_p50_ms = Percentile(gaps, 50);
    f.itl_p95_ms = Percentile(gaps, 95);
  }
  return f;
}

std::string BenchmarkLoad(const BenchmarkSpec& spec) {
  std::string load = std::string(spec.chat ? "chat, " : "") + std::to_string(spec.requests) +
                     " requests, concurrency " + std::to_string(spec.concurrency) +
                     ", max_tokens " + std::to_string(spec.max_tokens);
  if (spec.prompts.empty()) {
    load += ", prompt_tokens " + std::to_string(spec.prompt_tokens);
  } else {
    load += ", " + std::to_string(spec.prompts.size()) +
            (spec.prompts.size() == 1 ? " prompt" : " prompts");
  }
  if (spec.ignore_eos) load += ", ignore_eos";
  return load;
}

BenchmarkVerdict JudgeBenchmark(const BenchmarkSpec& spec, const BenchmarkFigures& figures,
                                const BenchmarkBaseline& baseline) {
  BenchmarkVerdict verdict;
  std::vector<std::string> broken;
  JudgeBounds(spec, figures, broken);
  std::string said;
  JudgeRegression(spec, figures, baseline, broken, said, verdict.baseline);
  verdict.passed = broken.empty();
  if (verdict.passed) {
    verdict.detail = FiguresHeadline(figures) + "; " + said;
    return verdict;
  }
  for (const std::string& text : broken)
    verdict.detail += (verdict.detail.empty() ? "" : "; ") + text;
  return verdict;
}

AnswerVerdict JudgeAnswer(const BenchmarkExpect& expect, const std::string& answer) {
  AnswerVerdict verdict;
  const std::string question = "the answer to " + QuotedText(expect.prompt);
  if (expect.equals) {
    verdict.passed = Trimmed(answer) == Trimmed(*expect.equals);
    if (!verdict.passed)
      verdict.detail = question + " is " + QuotedText(Trimmed(answer)) + ", expected " +
                       QuotedText(Trimmed(*expect.equals));
    return verdict;
  }
  RE2 pattern(expect.matches, RE2::Quiet);
  if (!pattern.ok()) {
    verdict.detail = "invalid regex '" + expect.matches + "': " + pattern.error();
    return verdict;
  }
  verdict.passed = RE2::PartialMatch(answer, pattern);
  if (!verdict.passed)
    verdict.detail = question + " does not match '" + expect.matches + "': " + QuotedText(answer);
  return verdict;
}

}  // namespace deployd
