// deployctl's plain follow: `apply --wait`, `retry --wait`, `skip --wait`, and `watch` when
// stdout is not a terminal (a log file, a CI job). One line per committed transition, no
// escape codes, so that the output reads the same in a file as on a screen. A follow that
// loses deployd connects again and asks for the events after the last one it has (after_seq),
// so that a restart of deployd shows nothing twice and loses nothing.
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include "ctl/ctl_verbs.h"
#include "ctl/terminal_screen.h"
#include "ctl/watch_view.h"
#include "protocol/answer.h"
#include "protocol/follow_stream.h"
#include "util/clock.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

// A progress line every sample would drown the transitions in a log; one per step this often
// still shows that (and how fast) a long download moves.
constexpr auto kProgressLineEvery = std::chrono::seconds(10);

void PrintFailureEvidence(const WireRun& run) {
  for (const WireStep& s : run.steps) {
    if (s.state != "failed") continue;
    std::cout << "  step " << s.id << ": " << s.reason << "\n";
    if (!s.evidence || !s.evidence->is_object()) continue;
    const json::object& e = s.evidence->as_object();
    for (const char* key : {"status_code", "body_excerpt", "error", "exit_status"}) {
      const json::value* v = e.if_contains(key);
      if (!v) continue;
      std::cout << "    " << key << ": "
                << (v->is_string() ? std::string(v->as_string()) : json::serialize(*v)) << "\n";
    }
    if (const json::value* tail = e.if_contains("output_tail"); tail && tail->is_array()) {
      std::cout << "    output (last lines):\n";
      for (const auto& l : tail->as_array())
        std::cout << "      " << (l.is_string() ? std::string(l.as_string()) : "") << "\n";
    }
  }
}

using ProgressTimes = std::map<std::string, std::chrono::steady_clock::time_point>;

// Prints one line of the follow stream the plain way; the exit code once it was the end line,
// else -1. `origin`: the run's creation, which the times count from.
int PrintPlainLine(const std::string& run_id, const json::object& line, bool announce,
                   std::int64_t& origin, ProgressTimes& last_progress_line) {
  std::string type = LineType(line);
  if (type == "snapshot") {
    origin = LineRun(line).created_at_ms;
    if (announce) std::cout << "following run " << run_id << "\n";
  } else if (type == "event") {
    std::cout << FormatEventLine(DecodeEvent(line), origin, StdoutStyle().color) << "\n";
  } else if (type == "missed") {
    // The stream goes on from the present; what was missed is in status and why.
    std::cout << "(missed " << DescribeMissed(DecodeMissed(line))
              << ": deployctl did not read fast enough; `deployctl status " << run_id
              << "` shows the run as it is)\n";
  } else if (type == "progress") {
    std::string step = ProgressLineStep(line);
    WireProgress progress = DecodeProgress(line);
    if (DescribeProgress(progress, 0).empty()) return -1;  // nothing known yet
    auto now = std::chrono::steady_clock::now();
    auto last = last_progress_line.find(step);
    if (last != last_progress_line.end() && now - last->second < kProgressLineEvery) return -1;
    last_progress_line[step] = now;
    std::int64_t at = progress.at_ms ? progress.at_ms : NowMs();
    std::cout << FormatProgressLine(step, progress, at, origin) << "\n";
  } else if (type == "end") {
    WireRun run = LineRun(line);
    std::cout << "run " << run_id << " " << run.state << " after "
              << FormatElapsed(run.finished_at_ms - run.created_at_ms);
    if (!run.reason.empty()) std::cout << ": " << run.reason;
    std::cout << "\n";
    if (run.state == "failed") PrintFailureEvidence(run);
    std::cout.flush();
    return ExitFor(run.state);
  }
  std::cout.flush();
  return -1;
}

}  // namespace

json::object FollowRequest(const std::string& run_id, std::int64_t after_seq) {
  json::object request{{"op", "follow"}, {"run", run_id}};
  if (after_seq) request["after_seq"] = after_seq;
  return request;
}

bool SeenBefore(const json::object& line, std::int64_t& last_seq) {
  if (LineType(line) != "event") return false;
  std::int64_t seq = DecodeEvent(line).seq;
  if (seq && seq <= last_seq) return true;
  last_seq = std::max(last_seq, seq);
  return false;
}

int FollowPlain(Client& client, const std::string& run_id, bool announce) {
  std::int64_t origin = 0;
  std::int64_t last_seq = 0;
  ProgressTimes last_progress_line;
  return WithReconnect(client, [&](bool again) {
    client.Send(FollowRequest(run_id, last_seq));
    for (;;) {
      json::object line = client.Receive();
      if (IsRefusal(line)) Client::Refused(line);
      if (SeenBefore(line, last_seq)) continue;
      int code = PrintPlainLine(run_id, line, announce && !again, origin, last_progress_line);
      if (code >= 0) return code;
    }
  });
}

int FollowJson(Client& client, const std::string& run_id) {
  std::int64_t last_seq = 0;
  return WithReconnect(client, [&](bool) {
    client.Send(FollowRequest(run_id, last_seq));
    for (;;) {
      json::object line = client.Receive();
      if (IsRefusal(line)) Client::Refused(line);
      if (SeenBefore(line, last_seq)) continue;
      std::cout << json::serialize(line) << std::endl;
      if (LineType(line) == "end") return ExitFor(LineRun(line).state);
    }
  });
}

}  // namespace deployd::ctl
