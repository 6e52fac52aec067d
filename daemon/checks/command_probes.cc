#include "checks/command_probes.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/this_coro.hpp>
#include <boost/json/array.hpp>
#include <cstdlib>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "checks/check_text.h"
#include "checks/probe_process.h"
#include "checks/version.h"
#include "util/pattern.h"
#include "util/units.h"

namespace deployd {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

constexpr size_t kRunTailLines = 50;
constexpr size_t kRunMatchBytes = 64 << 10;
constexpr size_t kMaxLineBytes = 1000;

struct OutputLine {
  std::string text;
  bool from_stderr = false;  // known only when the probe asked for stderr apart
};

// What a run probe keeps of its command's output: the last lines for evidence, and the start
// (bounded) for output_matches and version_at_least. Shared with the child's line callbacks,
// which may outlive the probe's coroutine when it is cancelled.
struct RunOutput {
  void AddLine(std::string_view line, bool from_stderr) {
    ++line_count;
    OutputLine kept{Utf8Excerpt(line, kMaxLineBytes), from_stderr};
    if (head_bytes + kept.text.size() <= kRunMatchBytes) {
      head_bytes += kept.text.size() + 1;
      head.push_back(kept);
    }
    tail.push_back(std::move(kept));
    if (tail.size() > kRunTailLines) tail.pop_front();
  }

  // The lines output_matches and version_at_least look at, in order: the start of the output
  // and, when it was longer than that, its end.
  std::vector<const OutputLine*> MatchLines() const {
    std::vector<const OutputLine*> lines;
    for (const OutputLine& line : head) lines.push_back(&line);
    size_t first_tail_index = line_count - tail.size();
    for (size_t i = 0; i < tail.size(); ++i)
      if (first_tail_index + i >= head.size()) lines.push_back(&tail[i]);
    return lines;
  }

  std::vector<OutputLine> head;
  size_t head_bytes = 0;
  std::deque<OutputLine> tail;
  size_t line_count = 0;
};

// The version a check compares: the first in stdout, else the first in stderr, so that a
// warning on stderr ("… 12.1 is deprecated") printed before the version does not decide.
// Its line goes into the evidence.
std::optional<std::string> ReadVersion(const std::vector<const OutputLine*>& lines,
                                       json::object& evidence) {
  for (bool from_stderr : {false, true}) {
    for (const OutputLine* line : lines) {
      if (line->from_stderr != from_stderr) continue;
      std::optional<std::string> version = FindVersion(line->text);
      if (!version) continue;
      evidence["version"] = *version;
      evidence["version_line"] = line->text;
      evidence["version_from"] = from_stderr ? "stderr" : "stdout";
      return version;
    }
  }
  return std::nullopt;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

asio::awaitable<CheckOutcome> ProbeRun(const Check& check) {
  json::object evidence = CheckEvidence(check);
  auto ex = co_await asio::this_coro::executor;
  auto state = std::make_shared<ProbeChildExit>(ex);
  auto output = std::make_shared<RunOutput>();
  SpawnOptions options;
  options.argv = check.command.Argv();
  options.env = check.env;
  bool reads_version = !check.version_at_least.empty() || !check.version_below.empty();
  // Only a version needs to know which stream said what; otherwise one pipe keeps the order.
  if (reads_version)
    options.on_stderr_line = [output](std::string_view line) { output->AddLine(line, true); };
  Result<std::shared_ptr<ChildProcess>> started = StartProbeChild(
      ex, options, state, [output](std::string_view line) { output->AddLine(line, false); });
  if (!started.ok()) {
    evidence["error"] = started.status().message();
    co_return MakeOutcome(check, false, started.status().message(), std::move(evidence));
  }
  std::shared_ptr<ChildProcess> child = *started;

  bool exited = co_await WaitForProbeChild(*state, *child, check.timeout);
  if (!exited) {
    child->Terminate(kProbeChildGrace);
    // Reap it before reporting, so that the next attempt does not overlap with this one.
    co_await WaitForProbeChild(*state, *child, kProbeChildGrace + std::chrono::seconds(1));
  }

  json::array tail;
  for (const OutputLine& line : output->tail) tail.push_back(json::value(line.text));
  evidence["output_tail"] = std::move(tail);
  if (state->exit) {
    evidence["exit_status"] = state->exit->AsShellStatus();
    if (state->exit->signal) evidence["signal"] = state->exit->signal;
  }
  if (!exited) {
    std::string message = "timed out after " + FormatDuration(check.timeout);
    evidence["error"] = message;
    co_return MakeOutcome(check, false, message, std::move(evidence));
  }
  if (!state->exit->ok())
    co_return MakeOutcome(check, false, state->exit->ToString(), std::move(evidence));

  std::vector<const OutputLine*> lines = output->MatchLines();
  if (!check.output_matches.empty()) {
    // The parser has checked the pattern; should it still not compile, the check fails.
    Result<PatternSet> pattern = CompilePattern(check.output_matches);
    if (!pattern.ok()) {
      evidence["error"] = pattern.status().message();
      co_return MakeOutcome(check, false, pattern.status().message(), std::move(evidence));
    }
    bool matched = std::any_of(lines.begin(), lines.end(), [&](const OutputLine* line) {
      return pattern->Matches(line->text);
    });
    if (!matched)
      co_return MakeOutcome(check, false, "output does not match '" + check.output_matches + "'",
                            std::move(evidence));
  }
  if (reads_version) {
    std::optional<std::string> version = ReadVersion(lines, evidence);
    if (!version)
      co_return MakeOutcome(check, false, "no version in the output", std::move(evidence));
    const std::string& low = check.version_at_least;
    const std::string& high = check.version_below;
    if (!low.empty() && CompareVersions(*version, low) < 0)
      co_return MakeOutcome(check, false, "version " + *version + " is below " + low,
                            std::move(evidence));
    if (!high.empty() && CompareVersions(*version, high) >= 0)
      co_return MakeOutcome(check, false, "version " + *version + " is not below " + high,
                            std::move(evidence));
    std::string range = !low.empty() ? " >= " + low : "";
    if (!high.empty()) range += (range.empty() ? " < " : ", < ") + high;
    CheckOutcome outcome =
        MakeOutcome(check, true, "version " + *version + range, std::move(evidence));
    outcome.measured["version"] = *version;
    co_return outcome;
  }
  co_return MakeOutcome(check, true, state->exit->ToString(), std::move(evidence));
}

CheckOutcome ProbeCommand(const Check& check) {
  json::object evidence = CheckEvidence(check);
  if (check.name.find('/') != std::string::npos) {
    if (IsExecutableFile(check.name)) {
      evidence["path"] = check.name;
      return MakeOutcome(check, true, "executable", std::move(evidence));
    }
    evidence["error"] = "not an executable file";
    return MakeOutcome(check, false, "not an executable file", std::move(evidence));
  }
  // The same search execvp does, so that a pass means a `run` step can start it. Alternatives
  // (huggingface-cli for hf) are tried in order after the name.
  const char* env_path = std::getenv("PATH");
  std::string path_list = env_path ? env_path : "/bin:/usr/bin";
  json::array searched;
  std::vector<std::string> names = {check.name};
  names.insert(names.end(), check.alternatives.begin(), check.alternatives.end());
  for (const std::string& name : names) {
    size_t start = 0;
    while (true) {
      size_t colon = path_list.find(':', start);
      std::string dir = path_list.substr(start, colon == std::string::npos ? colon : colon - start);
      if (dir.empty()) dir = ".";
      std::string candidate = dir + "/" + name;
      if (IsExecutableFile(candidate)) {
        evidence["path"] = candidate;
        return MakeOutcome(check, true, candidate, std::move(evidence));
      }
      if (name == check.name) searched.push_back(json::value(dir));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  std::string message = "not found on PATH";
  if (!check.alternatives.empty()) {
    message = "neither " + check.name;
    for (const std::string& name : check.alternatives) message += " nor " + name;
    message += " is on PATH";
  }
  evidence["error"] = message;
  evidence["searched"] = std::move(searched);
  return MakeOutcome(check, false, message, std::move(evidence));
}

}  // namespace deployd
