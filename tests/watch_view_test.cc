// The live view of `deployctl watch` as pure functions: a run's state (built from synthetic
// follow-stream lines) → lines of text, at a given time, for a given screen.
#include "ctl/watch_view.h"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

using namespace deployd;
namespace json = boost::json;

namespace {

constexpr std::int64_t kT0 = 1'700'000'000'000;  // the run's creation, in ms

json::object Snapshot() {
  json::value run = json::parse(R"({
    "id": "dl-3", "plan": "dl", "state": "running", "reason": "",
    "created_at_ms": 1700000000000, "finished_at_ms": 0,
    "steps": [
      {"id": "prepare", "phase": "main", "state": "succeeded", "attempts": 1,
       "started_at_ms": 1700000000100, "finished_at_ms": 1700000000500, "reason": ""},
      {"id": "download", "phase": "main", "state": "running", "attempts": 1,
       "started_at_ms": 1700000001000, "finished_at_ms": 0, "reason": "attempt 1"},
      {"id": "launch", "phase": "main", "state": "pending", "attempts": 0,
       "started_at_ms": 0, "finished_at_ms": 0, "reason": ""},
      {"id": "report", "phase": "on_failure", "state": "pending", "attempts": 0,
       "started_at_ms": 0, "finished_at_ms": 0, "reason": ""}]})");
  return {{"ok", true}, {"type", "snapshot"}, {"run", run}};
}

json::object Progress(double bytes, double total, double rate, double eta, std::int64_t last) {
  return {{"type", "progress"}, {"run", "dl-3"},        {"step", "download"},
          {"bytes", bytes},     {"total_bytes", total}, {"fraction", bytes / total},
          {"rate_bps", rate},   {"eta_s", eta},         {"last_progress_at_ms", last}};
}

json::object Event(const std::string& step, const std::string& kind, const std::string& state,
                   const std::string& detail, std::int64_t at, int attempt = 1) {
  return {{"type", "event"}, {"run", "dl-3"},    {"seq", 1},    {"step", step},      {"kind", kind},
          {"state", state},  {"detail", detail}, {"at_ms", at}, {"attempt", attempt}};
}

std::string Joined(const std::vector<std::string>& lines) {
  std::string out;
  for (const auto& l : lines) out += l + "\n";
  return out;
}

}  // namespace

TEST_CASE("watch view: progress bar, bytes, rate and ETA") {
  RunView view;
  ApplyFollowLine(view, Snapshot());
  constexpr double kGiB = 1024.0 * 1024 * 1024;
  ApplyFollowLine(view, Progress(1.2 * kGiB, 3 * kGiB, 45 * 1024 * 1024, 41, kT0 + 12'000));
  CHECK(Joined(RenderRunView(view, kT0 + 13'000, 120, 40)) ==
        "run dl-3 (plan dl): running, 13.0s\n"
        "STEP      STATE         TIME  DETAIL\n"
        "prepare   succeeded     0.4s\n"
        "download  running      12.0s  [########------------] 40% 1.2GiB / 3.0GiB, 45.0MiB/s, "
        "ETA 41s\n"
        "launch    pending\n"
        "report    pending             (on_failure)\n");
}

TEST_CASE("watch view: the elapsed time ticks and a stall shows") {
  RunView view;
  ApplyFollowLine(view, Snapshot());
  ApplyFollowLine(view, Progress(512, 2048, 0, 0, kT0 + 2'000));
  std::vector<std::string> lines = RenderRunView(view, kT0 + 95'000, 200, 40);
  CHECK(lines[0] == "run dl-3 (plan dl): running, 1m35s");
  CHECK(lines[3] ==
        "download  running      1m34s  [#####---------------] 25% 512B / 2.0KiB, 0B/s, ETA 0s, "
        "no progress for 1m33s");
}

TEST_CASE("watch view: progress without bytes, and unknown totals") {
  WireProgress p;
  p.fraction = 0.5;
  CHECK(DescribeProgress(p, 0) == "50%");
  WireProgress q;
  q.bytes = 3.0 * 1024 * 1024;
  q.rate_bps = 1024 * 1024;
  CHECK(DescribeProgress(q, 0) == "3.0MiB, 1.0MiB/s");
  WireProgress none;
  CHECK(DescribeProgress(none, 0) == "");
  // Progress lines: counts as they are, sizes (in bytes) as sizes.
  WireProgress files = DecodeProgress(json::parse(R"({"bytes": null, "done": 27, "total": 60,
      "fraction": 0.45, "rate_bps": null, "eta_s": 30.5})")
                                          .as_object());
  CHECK(DescribeProgress(files, 0) == "45% 27/60, ETA 31s");
  WireProgress sizes = DecodeProgress(
      json::parse(R"({"done": 1288490188, "total": 3221225472, "fraction": 0.4})").as_object());
  CHECK(DescribeProgress(sizes, 0) == "40% 1.2GiB/3.0GiB");
}

TEST_CASE("watch view: the progress bar") {
  CHECK(ProgressBar(0, 12) == "[----------]");
  CHECK(ProgressBar(0.55, 12) == "[#####-----]");
  CHECK(ProgressBar(1, 12) == "[##########]");
  CHECK(ProgressBar(7, 6) == "[####]");
  CHECK(ProgressBar(-1, 6) == "[----]");
}

TEST_CASE("watch view: byte and time formats") {
  CHECK(FormatBytes(0) == "0B");
  CHECK(FormatBytes(1023) == "1023B");
  CHECK(FormatBytes(1536) == "1.5KiB");
  CHECK(FormatBytes(540.0 * 1000 * 1000 * 1000) == "502.9GiB");
  CHECK(FormatBytes(3.0 * 1024 * 1024 * 1024 * 1024) == "3.0TiB");
  CHECK(FormatElapsed(0) == "0.0s");
  CHECK(FormatElapsed(12'345) == "12.3s");
  CHECK(FormatElapsed(245'000) == "4m05s");
  CHECK(FormatElapsed(7'620'000) == "2h07m");
}

TEST_CASE("watch view: events move steps on; the end line is final") {
  RunView view;
  ApplyFollowLine(view, Snapshot());
  ApplyFollowLine(view, Event("download", "step.state", "succeeded", "", kT0 + 20'000));
  ApplyFollowLine(view, Event("launch", "step.state", "waiting",
                              "waiting for approval: check the dashboard", kT0 + 20'100));
  ApplyFollowLine(view, Event("", "run.state", "waiting", "step launch: waiting", kT0 + 20'100, 0));
  CHECK(IsLive(view));
  std::vector<std::string> lines = RenderRunView(view, kT0 + 22'100, 200, 40);
  CHECK(lines[0] == "run dl-3 (plan dl): waiting, 22.1s — step launch: waiting");
  CHECK(lines[3] == "download  succeeded    19.0s");
  CHECK(lines[4] == "launch    waiting       2.0s  waiting for approval: check the dashboard");

  json::object end = Snapshot();
  json::object& run = end["run"].as_object();
  run["state"] = "succeeded";
  run["finished_at_ms"] = kT0 + 30'000;
  end["type"] = "end";
  ApplyFollowLine(view, end);
  CHECK_FALSE(IsLive(view));
  CHECK(RenderRunView(view, kT0 + 99'000, 200, 40)[0] ==
        "run dl-3 (plan dl): succeeded after 30.0s");
}

TEST_CASE("watch view: lines are cut to the width, steps folded to the height") {
  RunView view;
  ApplyFollowLine(view, Snapshot());
  for (const std::string& line : RenderRunView(view, kT0, 20, 40)) CHECK(line.size() <= 20);
  // Multi-byte characters count once.
  view.reason = "ééééééééééééééééééééééééééééé";
  CHECK(RenderRunView(view, kT0, 40, 40)[0] == "run dl-3 (plan dl): running, 0.0s — éééé");

  std::vector<std::string> lines = RenderRunView(view, kT0, 80, 5);
  REQUIRE(lines.size() == 5);
  CHECK(lines[2] == "… 1 finished step not shown");
  CHECK(lines[3].rfind("download", 0) == 0);
  CHECK(lines[4] == "… 2 more steps not shown");
  // Unlimited height: every step.
  CHECK(RenderRunView(view, kT0, 80, 0).size() == 6);
}

TEST_CASE("watch view: plain lines") {
  CHECK(FormatEventLine(
            DecodeEvent(Event("download", "step.state", "running", "attempt 1", kT0 + 100)), kT0) ==
        "[    0.1s] download                 running    attempt 1");
  CHECK(FormatEventLine(
            DecodeEvent(Event("", "run.preflight", "", "preflight: 2 checks passed", kT0 + 100)),
            kT0) == "[    0.1s] run                      preflight  preflight: 2 checks passed");
  WireProgress p = DecodeProgress(Progress(1024, 4096, 512, 6, kT0));
  CHECK(FormatProgressLine("download", p, kT0 + 12'000, kT0) ==
        "[   12.0s] download                 progress   25% 1.0KiB / 4.0KiB, 512B/s, ETA 6s");
}

TEST_CASE("watch view: a long step id is cut to its column, state and time stay on screen") {
  RunView view;
  ApplyFollowLine(view, Snapshot());
  view.steps[1].id = "download-the-weights-of-kimi-k2.5-nvfp4-shard-0001";
  std::vector<std::string> lines = RenderRunView(view, kT0 + 13'000, 60, 40);
  CHECK(lines[1] == "STEP                      STATE         TIME  DETAIL");
  CHECK(lines[3] == "download-the-weights-of…  running      12.0s  attempt 1");
  // A narrower screen narrows the column, to 8 at the least.
  lines = RenderRunView(view, kT0 + 13'000, 44, 40);
  CHECK(lines[3] == "download-th…  running      12.0s  attempt 1");
  lines = RenderRunView(view, kT0 + 13'000, 30, 40);
  CHECK(lines[3] == "downloa…  running      12.0s");
}

TEST_CASE("id columns: as wide as the longest id, on a screen no wider than leaves room") {
  CHECK(IdColumnWidth(40, 24, 0, 30) == 40);  // not a screen: whole ids
  CHECK(IdColumnWidth(40, 24, 200, 30) == 24);
  CHECK(IdColumnWidth(12, 24, 200, 30) == 12);
  CHECK(IdColumnWidth(40, 24, 45, 30) == 15);
  CHECK(IdColumnWidth(40, 24, 20, 30) == 8);
  CHECK(FitCell("prepare", 10) == "prepare   ");
  CHECK(FitCell("download-weights", 10) == "download-…");
  CHECK(FitCell("ééééé", 4) == "ééé…");
  CHECK(TextWidth("ééé…") == 4);
}

TEST_CASE("watch view: states in colour, which takes no room") {
  CHECK(Paint("running   ", "running") == "\x1b[36mrunning\x1b[0m   ");
  CHECK(Paint("failed", "failed") == "\x1b[1;31mfailed\x1b[0m");
  CHECK(Paint("pending   ", "pending") == "pending   ");
  CHECK(TextWidth(Paint("succeeded", "succeeded")) == 9);
  RunView view;
  ApplyFollowLine(view, Snapshot());
  std::vector<std::string> lines = RenderRunView(view, kT0 + 13'000, 120, 40, true);
  CHECK(lines[0] == "run dl-3 (plan dl): \x1b[36mrunning\x1b[0m, 13.0s");
  CHECK(lines[2] == "prepare   \x1b[32msucceeded\x1b[0m     0.4s");
  CHECK(lines[3] == "download  \x1b[36mrunning\x1b[0m      12.0s  attempt 1");
  // Cut inside a colour: the colour is ended.
  lines = RenderRunView(view, kT0 + 13'000, 14, 40, true);
  CHECK(lines[3] == "download  \x1b[36mrunn\x1b[0m");
  CHECK(FormatEventLine(DecodeEvent(Event("download", "step.state", "failed", "exit 1", kT0)), kT0,
                        true) ==
        "[    0.0s] download                 \x1b[1;31mfailed\x1b[0m     exit 1");
}
