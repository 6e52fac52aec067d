// deployctl's plain follow: `apply --wait`, `retry --wait`, `skip --wait`, and `watch` when
// stdout is not a terminal (a log file, a CI job). One line per committed transition, no
// escape codes, so that the output reads the same in a file as on a screen.
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include "ctl/ctl_verbs.h"
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

}  // namespace

int FollowPlain(Client& client, const std::string& run_id, bool announce) {
  client.Send({{"op", "follow"}, {"run", run_id}});
  std::int64_t origin = 0;
  std::map<std::string, std::chrono::steady_clock::time_point> last_progress_line;
  for (;;) {
    json::object line = client.Receive();
    if (IsRefusal(line)) Client::Refused(line);
    std::string type = LineType(line);
    if (type == "snapshot") {
      origin = LineRun(line).created_at_ms;
      if (announce) std::cout << "following run " << run_id << "\n";
    } else if (type == "event") {
      std::cout << FormatEventLine(DecodeEvent(line), origin) << "\n";
    } else if (type == "missed") {
      // The stream goes on from the present; what was missed is in status and why.
      std::cout << "(missed " << DescribeMissed(DecodeMissed(line))
                << ": deployctl did not read fast enough; `deployctl status " << run_id
                << "` shows the run as it is)\n";
    } else if (type == "progress") {
      std::string step = ProgressLineStep(line);
      WireProgress progress = DecodeProgress(line);
      if (DescribeProgress(progress, 0).empty()) continue;  // nothing known yet
      auto now = std::chrono::steady_clock::now();
      auto last = last_progress_line.find(step);
      if (last != last_progress_line.end() && now - last->second < kProgressLineEvery) continue;
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
  }
}

}  // namespace deployd::ctl
