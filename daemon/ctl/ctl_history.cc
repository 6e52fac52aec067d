// deployctl history: what a plan's runs measured, newest first — the date, the run, its state,
// the version a version check saw (vLLM's, in the shipped plans), and the figures of its
// benchmark: output tokens/s, time to first token (p50, p95), inter-token latency (p95). And
// the one line deployctl's other verbs show a benchmark's figures with (status, why).
#include <boost/json.hpp>
#include <cstdio>
#include <iostream>

#include "ctl/ctl_verbs.h"
#include "deployd/protocol.h"
#include "protocol/benchmark_wire.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

const json::object* ObjectAt(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v ? v->if_object() : nullptr;
}

std::string Millis(const std::optional<double>& ms) { return ms ? FormatMillis(*ms) : "-"; }

// One line per benchmark a run recorded (one with dashes when it recorded none).
void PrintRunLines(const json::object& run) {
  const json::value* version = run.if_contains("version");
  std::string v = version && version->is_string() ? std::string(version->as_string()) : "-";
  std::vector<std::optional<BenchmarkFigures>> lines;
  if (const json::value* b = run.if_contains("benchmarks"); b && b->is_array()) {
    for (const json::value& item : b->as_array()) {
      const json::object* figures =
          item.is_object() ? ObjectAt(item.as_object(), "benchmark") : nullptr;
      if (figures) lines.push_back(DecodeFigures(*figures));
    }
  }
  if (lines.empty()) lines.emplace_back();
  for (const auto& f : lines) {
    std::printf("%-19s  %-28s %-10s %-16s %9s %9s %9s %9s\n",
                Clock(Int(run, "created_at_ms")).c_str(), Str(run, "run").c_str(),
                Str(run, "state").c_str(), v.c_str(), f ? FormatRate(f->tokens_per_s).c_str() : "-",
                Millis(f ? f->ttft_p50_ms : std::nullopt).c_str(),
                Millis(f ? f->ttft_p95_ms : std::nullopt).c_str(),
                Millis(f ? f->itl_p95_ms : std::nullopt).c_str());
  }
}

}  // namespace

std::string BenchmarkLine(const json::object& evidence) {
  const json::object* figures = ObjectAt(evidence, "benchmark");
  std::optional<BenchmarkFigures> f = figures ? DecodeFigures(*figures) : std::nullopt;
  if (!f) return "";
  std::string line = FiguresHeadline(*f);
  const json::object* baseline = ObjectAt(evidence, "baseline");
  if (!baseline) return line;
  const json::value* run = baseline->if_contains("run");
  const json::value* rate = baseline->if_contains("tokens_per_s");
  if (run && run->is_string() && rate && rate->is_number()) {
    line += "; baseline run " + std::string(run->as_string()) + ": " +
            FormatRate(rate->to_number<double>()) + " tokens/s";
    if (const json::value* change = baseline->if_contains("change_tokens_per_s");
        change && change->is_number()) {
      char text[32];
      std::snprintf(text, sizeof text, " (%+.1f%%)", change->to_number<double>() * 100);
      line += text;
    }
  } else if (!Str(*baseline, "note").empty()) {
    line += "; " + Str(*baseline, "note");
  }
  return line;
}

int History(Client& client, const std::string& plan, int limit, bool json_out) {
  json::object request{{"op", "history"}, {"plan", plan}};
  if (limit > 0) request["limit"] = limit;
  json::object answer = client.Call(request);
  const json::object& history = answer["history"].as_object();
  if (json_out) {
    std::cout << json::serialize(history) << "\n";
    return kExitOk;
  }
  const json::array& runs = history.at("runs").as_array();
  if (runs.empty()) {
    std::cout << "plan " << plan << ": no runs recorded\n";
    return kExitOk;
  }
  std::printf("%-19s  %-28s %-10s %-16s %9s %9s %9s %9s\n", "DATE", "RUN", "STATE", "VERSION",
              "TOKENS/S", "TTFT_P50", "TTFT_P95", "ITL_P95");
  for (const json::value& run : runs)
    if (run.is_object()) PrintRunLines(run.as_object());
  std::fflush(stdout);
  return kExitOk;
}

}  // namespace deployd::ctl
