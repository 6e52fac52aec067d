#include "checks/check_text.h"

#include "checks/benchmark_verdict.h"
#include "checks/json_expect.h"
#include "util/units.h"

namespace deployd {
namespace {

namespace json = boost::json;

constexpr size_t kCommandTextChars = 60;

}  // namespace

std::string CommandText(const Command& command) {
  if (command.shell) return command.script;
  std::string text;
  for (const std::string& arg : command.argv) {
    if (!text.empty()) text += ' ';
    bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`") == std::string::npos;
    text += plain ? arg : "'" + arg + "'";
  }
  return text;
}

std::string Utf8Excerpt(std::string_view text, size_t max_bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    auto byte = static_cast<unsigned char>(text[i]);
    size_t length = byte < 0x80                    ? 1
                    : byte >= 0xC2 && byte <= 0xDF ? 2
                    : byte >= 0xE0 && byte <= 0xEF ? 3
                    : byte >= 0xF0 && byte <= 0xF4 ? 4
                                                   : 0;
    for (size_t k = 1; k < length; ++k)
      if (i + k >= text.size() || (static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80)
        length = 0;
    std::string_view piece = length ? text.substr(i, length) : kReplacement;
    if (out.size() + piece.size() > max_bytes) return out + "…";
    out += piece;
    i += length ? length : 1;
  }
  return out;
}

std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string TcpHost(const Check& check) { return check.host.empty() ? "127.0.0.1" : check.host; }
std::string BindHost(const Check& check) { return check.host.empty() ? "0.0.0.0" : check.host; }

std::string CheckSubject(const Check& check) {
  std::string kind(ToString(check.kind));
  switch (check.kind) {
    case CheckKind::kRun:
      return kind + " '" + Utf8Excerpt(CommandText(check.command), kCommandTextChars) + "'";
    case CheckKind::kHttp:
      return kind + " " + check.method + " " + check.url;
    case CheckKind::kTcp:
      return kind + " " + HostPort(TcpHost(check), check.port);
    case CheckKind::kFile:
    case CheckKind::kDiskFree:
    case CheckKind::kWeightsComplete:
      return kind + " " + check.path;
    case CheckKind::kCommand:
      return kind + " " + check.name;
    case CheckKind::kPortFree:
      return kind + " " + HostPort(BindHost(check), check.port);
    case CheckKind::kService:
    case CheckKind::kProcess:
    case CheckKind::kGpusFree:
      return kind + " " + CheckTarget(check);
    case CheckKind::kBenchmark:
      return kind + " " + check.benchmark.url;
  }
  return kind;
}

std::string CheckTarget(const Check& check) {
  switch (check.kind) {
    case CheckKind::kRun:
      return CommandText(check.command);
    case CheckKind::kHttp:
      return check.method + " " + check.url;
    case CheckKind::kTcp:
      return HostPort(TcpHost(check), check.port);
    case CheckKind::kFile:
    case CheckKind::kDiskFree:
    case CheckKind::kWeightsComplete:
      return check.path;
    case CheckKind::kCommand:
      return check.name;
    case CheckKind::kPortFree:
      return HostPort(BindHost(check), check.port);
    case CheckKind::kService:
      return check.unit;
    case CheckKind::kProcess:
      return "'" + check.match + "'";
    case CheckKind::kGpusFree: {
      if (check.gpu.gpus.empty()) return "all";
      std::string list;
      for (int gpu : check.gpu.gpus) list += (list.empty() ? "" : ",") + std::to_string(gpu);
      return list;
    }
    case CheckKind::kBenchmark:
      return "POST " + check.benchmark.url + " (model " + check.benchmark.model + ")";
  }
  return "";
}

json::object CheckEvidence(const Check& check) {
  json::object evidence;
  evidence["check"] = ToString(check.kind);
  evidence["target"] = CheckTarget(check);
  return evidence;
}

CheckOutcome MakeOutcome(const Check& check, bool passed, const std::string& detail,
                         json::object evidence) {
  CheckOutcome outcome;
  outcome.passed = passed;
  outcome.summary = CheckSubject(check) + ": " + detail;
  outcome.evidence = std::move(evidence);
  return outcome;
}

std::string DescribeCheck(const Check& check) {
  std::string text = CheckSubject(check);
  switch (check.kind) {
    case CheckKind::kRun:
      if (!check.output_matches.empty()) text += " matches '" + check.output_matches + "'";
      if (!check.version_at_least.empty()) text += " version >= " + check.version_at_least;
      if (!check.version_below.empty()) text += " version < " + check.version_below;
      break;
    case CheckKind::kHttp:
      if (check.status != 200) text += " status " + std::to_string(check.status);
      if (!check.body_contains.empty()) text += " containing '" + check.body_contains + "'";
      for (const JsonExpectation& x : check.json) text += ", json " + DescribeExpectation(x);
      break;
    case CheckKind::kFile:
      if (check.absent) {
        text += " absent";
      } else if (check.min_size) {
        text += " >= " + FormatSize(*check.min_size);
      }
      break;
    case CheckKind::kDiskFree:
      text += " >= " + FormatSize(check.at_least);
      break;
    case CheckKind::kService:
      text += " " + check.unit_state;
      if (check.enabled) text += *check.enabled ? ", enabled" : ", disabled";
      break;
    case CheckKind::kProcess:
      text += check.absent ? " absent" : " present";
      break;
    case CheckKind::kGpusFree:
      text += " (max used " + FormatSize(check.gpu.max_used) + ")";
      break;
    case CheckKind::kBenchmark:
      text += " (" + BenchmarkLoad(check.benchmark) + ")";
      break;
    case CheckKind::kTcp:
    case CheckKind::kCommand:
    case CheckKind::kPortFree:
    case CheckKind::kWeightsComplete:
      break;
  }
  return text;
}

}  // namespace deployd
