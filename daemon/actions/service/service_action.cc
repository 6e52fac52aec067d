#include "actions/service/service_action.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "actions/service/systemctl.h"
#include "actions/service/unit_cgroup.h"
#include "actions/service/unit_file.h"
#include "process/blocking_command.h"
#include "process/process_stop.h"
#include "util/clock.h"
#include "util/journal_entry.h"
#include "util/units.h"

namespace deployd {
namespace {

using namespace std::chrono_literals;

// Beyond TimeoutStopSec: systemd's SIGKILL, the final cleanup and our own reads.
constexpr Duration kStopMargin = 30s;
// After a start, the unit must keep the same running main process this long: a server that
// dies on a bad flag or a missing file does so at once, and Type=exec reported "started"
// before that.
constexpr Duration kSettle = 2s;
// Once the unit is inactive, for processes that were SIGKILLed to leave its cgroup.
constexpr Duration kDrain = 5s;
constexpr int kJournalLines = 20;

// The part of the unit's journal an action speaks for: from when it began, without the lines
// of the invocation that ran before (a restart's old server). Its lines pass through fail_on
// like the action's own, so an older start's fatal line must not be among them.
struct JournalWindow {
  std::int64_t since_ms = 0;
  std::string previous_invocation;
  // Its main process: what it wrote is its own whatever invocation journald stamped on it
  // (util/journal_entry.h).
  pid_t previous_main_pid = 0;

  bool OfPrevious(const JournalEntry& entry) const {
    return (!previous_invocation.empty() && entry.invocation == previous_invocation) ||
           (previous_main_pid > 1 && entry.pid == previous_main_pid);
  }
};

void SayJournal(const std::string& unit, const JournalWindow& window, const ActionContext& ctx) {
  // Newest first (-r), so that -n keeps the last lines.
  std::vector<std::string> argv = {"journalctl", "-u", unit, "-q",
                                   "--no-pager", "-r", "-n", std::to_string(kJournalLines)};
  argv.push_back("--since=" + JournalTime(window.since_ms));
  argv.insert(argv.end(), std::begin(kJournalJsonArgs), std::end(kJournalJsonArgs));
  auto out = RunBlocking(argv, kSystemctlTimeout);
  if (!out.ok() || !out->ok()) {
    ctx.say("no journal for " + unit + ": " + (out.ok() ? out->Reason() : out.status().message()));
    return;
  }
  std::vector<std::string> lines;  // newest first
  std::istringstream entries(out->out);
  std::string line;
  while (std::getline(entries, line)) {
    std::optional<JournalEntry> entry = ParseJournalEntry(line);
    if (!entry || window.OfPrevious(*entry)) continue;
    std::istringstream message(entry->message);
    std::vector<std::string> pieces;
    for (std::string piece; std::getline(message, piece);) {
      if (!piece.empty() && piece.back() == '\r') piece.pop_back();
      if (!piece.empty()) pieces.push_back(piece);
    }
    lines.insert(lines.end(), pieces.rbegin(), pieces.rend());
  }
  if (lines.empty()) {
    ctx.say("nothing in the journal of " + unit + " since " + JournalTime(window.since_ms));
    return;
  }
  ctx.say("last journal lines of " + unit + ":");
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) ctx.say("  " + *it);
}

// ---------------------------------------------------------------- enabled

Status ApplyEnabled(const std::string& unit, bool want, const ActionContext& ctx) {
  const char* word = want ? "enabled" : "disabled";
  auto st = ShowUnit(unit);
  if (!st.ok()) return st.status();
  if (!st->Loaded()) {
    if (!want && st->load_state == "not-found") {
      ctx.say(unit + " is not installed; nothing to disable");
      return Status::Ok();
    }
    return Status::Error(unit + " cannot be " + word +
                         ": it is not installed (LoadState=" + st->load_state + ")");
  }
  if (st->Enabled() == want) {
    ctx.say(unit + " is already " + word + " (" + st->unit_file_state + ")");
    return Status::Ok();
  }
  if (Status s = SystemctlVerb(want ? "enable" : "disable", unit); !s.ok()) return s;
  st = ShowUnit(unit);
  if (!st.ok()) return st.status();
  if (st->Enabled() != want) {
    std::string why = st->unit_file_state == "static" ? " (no [Install] section)" : "";
    return Status::Error(unit + " could not be " + word + ": UnitFileState=" + st->unit_file_state +
                         why);
  }
  ctx.say(unit + " is " + word);
  return Status::Ok();
}

// ---------------------------------------------------------------- started

std::string NotRunning(const std::string& unit, const UnitStatus& st) {
  std::string text = unit + " is not running (" + st.active_state + "/" + st.sub_state + ")";
  if (std::string exit = st.MainExit(); !exit.empty()) text += ": " + exit;
  return text;
}

// After a start the unit must keep running with the same main process for kSettle: a server
// that exits on a bad flag is caught here, the moment its main process exits. The journal's
// last lines are said when it does not.
Status ProveRunning(const std::string& unit, const JournalWindow& window,
                    const ActionContext& ctx) {
  auto started = ShowUnit(unit);
  if (!started.ok()) return started.status();
  if ((started->Running() || started->Starting()) && started->main_pid > 0)
    WaitUntilGone(std::vector<pid_t>{started->main_pid}, kSettle);
  auto st = ShowUnit(unit);
  if (!st.ok()) return st.status();
  if (!st->Running()) {
    SayJournal(unit, window, ctx);
    return Status::Error(NotRunning(unit, *st));
  }
  if ((started->main_pid > 0 && st->main_pid != started->main_pid) ||
      st->n_restarts > started->n_restarts) {
    SayJournal(unit, window, ctx);
    return Status::Error(unit + " restarted right after starting (main pid " +
                         std::to_string(started->main_pid) + ", then " +
                         std::to_string(st->main_pid) + "): it is crash-looping");
  }
  ctx.say(unit + " is active (running), main " + DescribePid(st->main_pid));
  return Status::Ok();
}

Status Start(const std::string& unit, const ServiceAction& action, bool restart,
             bool unit_file_changed, const ActionContext& ctx) {
  const std::int64_t began_ms = NowMs();
  auto st = ShowUnit(unit);
  if (!st.ok()) return st.status();
  const JournalWindow window{began_ms, st->invocation_id, st->main_pid};
  if (!st->Loaded() && !(st->load_state == "not-found" && !st->Stopped())) {
    if (st->load_state == "not-found") {
      return Status::Error(unit +
                           " is not installed: no unit file (give `exec` to have deployd "
                           "write one)");
    }
    return Status::Error(unit + " cannot be started: LoadState=" + st->load_state);
  }
  if (!restart && st->Running()) {
    if (!unit_file_changed) {
      ctx.say(unit + " is already active (running), main " + DescribePid(st->main_pid) +
              "; nothing to do");
      return Status::Ok();
    }
    ctx.say("the unit file changed while " + unit + " was running: restarting it");
    restart = true;
  }
  if (st->active_state == "failed") {
    // An operator would do the same: a failed unit's start limit would refuse the start.
    ctx.say(unit + " had failed (Result=" + st->result + "); systemctl reset-failed");
    if (Status s = SystemctlVerb("reset-failed", unit); !s.ok()) return s;
  }
  const char* verb = restart ? "restart" : "start";
  ctx.say(std::string("systemctl ") + verb + " " + unit);
  auto out = Systemctl({verb, unit}, action.start_timeout);
  if (!out.ok()) return out.status();
  if (!out->ok()) {
    std::string reason = out->Reason();
    auto after = ShowUnit(unit);
    SayJournal(unit, window, ctx);
    std::string exit = after.ok() ? after->MainExit() : "";
    return Status::Error(std::string("systemctl ") + verb + " " + unit + " failed: " + reason +
                         (exit.empty() ? "" : "; " + exit));
  }
  return ProveRunning(unit, window, ctx);
}

// ---------------------------------------------------------------- stopped

// "2 processes left in kimi.service's cgroup after stop: pid 123 (VLLM::Worker_TP0), …"
std::string LeftoverError(const std::string& unit, const std::vector<pid_t>& left,
                          const std::string& when) {
  return ProcessCount(left.size()) + " left in " + unit + "'s cgroup " + when + ": " +
         DescribePids(left);
}

// What is in the unit's cgroup; an error when that cannot be read.
Result<std::vector<pid_t>> Leftovers(const std::string& unit, const UnitStatus& st) {
  Result<std::vector<pid_t>> left = UnitCgroupProcs(st.control_group);
  if (!left.ok())
    return Status::Error("cannot prove that no process is left in " + unit +
                         "'s cgroup: " + left.status().message());
  return left;
}

Status Stop(const std::string& unit, const ServiceAction& action, const ActionContext& ctx) {
  const JournalWindow window{NowMs(), ""};  // the stopping server's own lines are the point
  auto st = ShowUnit(unit);
  if (!st.ok()) return st.status();
  if (st->Stopped()) {
    Result<std::vector<pid_t>> left = Leftovers(unit, *st);
    if (!left.ok()) return left.status();
    if (!left->empty()) {
      return Status::Error(LeftoverError(unit, *left, "although it is " + st->State()));
    }
    if (st->load_state == "not-found") {
      ctx.say(unit + " is not installed; nothing to stop");
    } else {
      ctx.say(unit + " is already stopped: " + st->State());
    }
    return Status::Ok();
  }
  Duration stop_timeout = std::max(action.stop_timeout, st->timeout_stop.value_or(Duration(0)));
  ctx.say("systemctl stop " + unit + " (TimeoutStopSec " +
          (st->timeout_stop ? FormatDuration(*st->timeout_stop) : std::string("infinity")) + ")");
  auto out = Systemctl({"stop", unit}, stop_timeout + kStopMargin);
  if (!out.ok()) return out.status();
  if (!out->ok()) return Status::Error("systemctl stop " + unit + " failed: " + out->Reason());

  // systemctl stop returns when systemd's stop job has ended: the state and the cgroup are
  // proven here, processes that were just SIGKILLed given kDrain to go (waited for on pidfds).
  st = ShowUnit(unit);
  if (!st.ok()) return st.status();
  if (!st->Stopped()) {
    SayJournal(unit, window, ctx);
    std::string main = st->main_pid > 0 ? ", main " + DescribePid(st->main_pid) : "";
    return Status::Error(unit + " did not stop: " + st->State() + main);
  }
  Result<std::vector<pid_t>> left = Leftovers(unit, *st);
  if (left.ok() && !left->empty()) {
    WaitUntilGone(*left, kDrain);
    left = Leftovers(unit, *st);
  }
  if (!left.ok()) return left.status();
  if (!left->empty()) return Status::Error(LeftoverError(unit, *left, "after stop"));
  std::string result =
      st->result.empty() || st->result == "success" ? "" : " (Result=" + st->result + ")";
  ctx.say(unit + " is stopped: " + st->State() + result + ", no process left in its cgroup");
  return Status::Ok();
}

}  // namespace

Status RunServiceAction(const ServiceAction& action, const ActionContext& ctx) {
  auto unit = NormalizeUnit(action.unit);
  if (!unit.ok()) return unit.status();
  const std::string& state = action.state;
  if (state != "" && state != "started" && state != "stopped" && state != "restarted") {
    return Status::Error("service " + *unit + ": unknown state '" + state +
                         "' (started, stopped or restarted)");
  }
  if (FindOnPath("systemctl").empty()) {
    return Status::Error("systemctl not found on PATH: the service action needs systemd");
  }
  bool unit_file_changed = false;
  if (!action.exec.empty()) {
    auto prepared = PrepareUnit(action, *unit);
    if (!prepared.ok()) return prepared.status();
    auto written = InstallUnitFile(*prepared, ctx);
    if (!written.ok()) return written.status();
    unit_file_changed = *written;
    auto st = ShowUnit(*unit);
    if (!st.ok()) return st.status();
    // Also when an earlier attempt wrote the file but stopped before reloading.
    if (unit_file_changed || st->need_reload || !st->Loaded()) {
      ctx.say("systemctl daemon-reload");
      if (Status s = SystemctlVerb("daemon-reload", ""); !s.ok()) return s;
    }
  }
  if (action.enabled) {
    if (Status s = ApplyEnabled(*unit, *action.enabled, ctx); !s.ok()) return s;
  }
  if (state == "started" || state == "restarted") {
    return Start(*unit, action, state == "restarted", unit_file_changed, ctx);
  }
  if (state == "stopped") return Stop(*unit, action, ctx);
  return Status::Ok();
}

}  // namespace deployd
