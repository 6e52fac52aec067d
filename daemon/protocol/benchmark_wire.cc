#include "protocol/benchmark_wire.h"

#include <boost/json.hpp>
#include <cmath>
#include <cstdio>

#include "protocol/wire_fields.h"

namespace deployd {

namespace json = boost::json;

namespace {

// Two decimals are more than any of these figures can claim, and keep the JSON readable.
json::value Rounded(double v) { return std::round(v * 100) / 100; }

json::value OptRounded(const std::optional<double>& v) {
  return v ? Rounded(*v) : json::value(nullptr);
}

std::string Printf(const char* format, double v) {
  char text[64];
  std::snprintf(text, sizeof text, format, v);
  return text;
}

}  // namespace

json::object EncodeFigures(const BenchmarkFigures& f) {
  json::object o;
  o["url"] = f.url;
  o["model"] = f.model;
  o["load"] = f.load;
  o["requests"] = f.requests;
  o["errors"] = f.errors;
  o["output_tokens"] = f.output_tokens;
  o["token_count"] = f.token_count;
  o["duration_ms"] = f.duration_ms;
  o["tokens_per_s"] = Rounded(f.tokens_per_s);
  o["request_tokens_per_s_p50"] = OptRounded(f.request_tokens_per_s_p50);
  o["request_tokens_per_s_min"] = OptRounded(f.request_tokens_per_s_min);
  o["ttft_p50_ms"] = OptRounded(f.ttft_p50_ms);
  o["ttft_p95_ms"] = OptRounded(f.ttft_p95_ms);
  o["itl_p50_ms"] = OptRounded(f.itl_p50_ms);
  o["itl_p95_ms"] = OptRounded(f.itl_p95_ms);
  if (!f.first_error.empty()) o["first_error"] = f.first_error;
  return o;
}

std::optional<BenchmarkFigures> DecodeFigures(const json::object& o) {
  WireFields w{o};
  std::optional<double> rate = w.Number("tokens_per_s");
  if (!rate) return std::nullopt;
  BenchmarkFigures f;
  f.url = w.Str("url");
  f.model = w.Str("model");
  f.load = w.Str("load");
  f.requests = w.Int("requests");
  f.errors = w.Int("errors");
  f.output_tokens = w.Int("output_tokens");
  f.token_count = w.Str("token_count");
  f.duration_ms = w.Int("duration_ms");
  f.tokens_per_s = *rate;
  f.request_tokens_per_s_p50 = w.Number("request_tokens_per_s_p50");
  f.request_tokens_per_s_min = w.Number("request_tokens_per_s_min");
  f.ttft_p50_ms = w.Number("ttft_p50_ms");
  f.ttft_p95_ms = w.Number("ttft_p95_ms");
  f.itl_p50_ms = w.Number("itl_p50_ms");
  f.itl_p95_ms = w.Number("itl_p95_ms");
  f.first_error = w.Str("first_error");
  return f;
}

std::string FormatMillis(double ms) {
  if (ms >= 1000) return Printf("%.2fs", ms / 1000);
  if (ms >= 100) return Printf("%.0fms", ms);
  return Printf("%.1fms", ms);
}

std::string FormatRate(double tokens_per_s) { return Printf("%.1f", tokens_per_s); }

std::string FiguresHeadline(const BenchmarkFigures& f) {
  std::string text = FormatRate(f.tokens_per_s) + " tokens/s";
  auto pair = [&](const char* name, const std::optional<double>& p50,
                  const std::optional<double>& p95) {
    if (!p50 || !p95) return;
    text += std::string(", ") + name + " p50 " + FormatMillis(*p50) + " p95 " + FormatMillis(*p95);
  };
  pair("TTFT", f.ttft_p50_ms, f.ttft_p95_ms);
  pair("ITL", f.itl_p50_ms, f.itl_p95_ms);
  text += " (" + std::to_string(f.requests) + (f.requests == 1 ? " request" : " requests");
  if (f.errors > 0)
    text += ", " + std::to_string(f.errors) + (f.errors == 1 ? " error" : " errors");
  return text + ")";
}

}  // namespace deployd
