#include "actions/service/service_action.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json/array.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string_view>
#include <vector>

#include "actions/kill_action.h"
#include "process/blocking_command.h"
#include "process/process_table.h"
#include "util/units.h"

namespace deployd {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// systemctl show, enable, daemon-reload, journalctl: quick unless systemd itself is stuck.
constexpr Duration kToolTimeout = 30s;
// Beyond TimeoutStopSec: systemd's SIGKILL, the final cleanup and our own reads.
constexpr Duration kStopMargin = 30s;
// After a start, the unit must keep the same running main process this long: a server that
// dies on a bad flag or a missing file does so at once, and Type=exec reported "started"
// before that.
constexpr Duration kSettle = 2s;
// Once the unit is inactive, for processes that were SIGKILLed to leave its cgroup.
constexpr Duration kDrain = 5s;
constexpr int kJournalLines = 20;

constexpr char kShowProperties[] =
    "LoadState,ActiveState,SubState,MainPID,ExecMainStatus,ExecMainCode,UnitFileState,"
    "ControlGroup,NRestarts,Result,NeedDaemonReload,TimeoutStopUSec";

// ---------------------------------------------------------------- small helpers

std::string FindOnPath(const std::string& name) {
  const char* env = std::getenv("PATH");
  std::string path = env ? env : "/usr/local/bin:/usr/bin:/bin";
  std::istringstream dirs(path);
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
  }
  return "";
}

template <typename Int>
Int ToInt(std::string_view text) {
  Int value = 0;
  std::from_chars(text.data(), text.data() + text.size(), value);
  return value;
}

// systemd's time spans as `show` prints them: "2min", "1min 30s", "500ms", "infinity".
std::optional<Duration> ParseSystemdTimespan(std::string_view text) {
  if (text.empty() || text == "infinity") return std::nullopt;
  static const std::map<std::string_view, double> kUnitsMs = {
      {"us", 0.001},    {"ms", 1},         {"s", 1000},       {"min", 60'000},
      {"h", 3'600'000}, {"d", 86'400'000}, {"w", 604'800'000}};
  double total = 0;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && text[i] == ' ') ++i;
    size_t num_start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
      ++i;
    if (num_start == i) break;
    double number = std::atof(std::string(text.substr(num_start, i - num_start)).c_str());
    size_t unit_start = i;
    while (i < text.size() && std::isalpha(static_cast<unsigned char>(text[i]))) ++i;
    std::string_view unit = text.substr(unit_start, i - unit_start);
    auto it = kUnitsMs.find(unit.empty() ? "s" : unit);
    if (it == kUnitsMs.end()) return std::nullopt;
    total += number * it->second;
  }
  return Duration(static_cast<Duration::rep>(total));
}

std::string SignalName(int sig) {
  const char* abbrev = ::sigabbrev_np(sig);
  return std::to_string(sig) + (abbrev ? std::string(" (SIG") + abbrev + ")" : std::string());
}

// The exit statuses systemd itself gives a service it could not start (systemd.exec(5)).
std::string SystemdExitMeaning(int status) {
  switch (status) {
    case 200:
      return " (CHDIR: the working directory could not be entered)";
    case 203:
      return " (EXEC: the program could not be executed)";
    case 217:
      return " (USER: the user could not be looked up)";
    default:
      return "";
  }
}

std::string ProcessName(pid_t pid) {
  auto info = ReadProcess(pid);
  std::string title = info ? info->Title() : "?";
  return "pid " + std::to_string(pid) + " (" + title + ")";
}

// ---------------------------------------------------------------- the unit as systemd sees it

struct UnitStatus {
  std::string load_state, active_state, sub_state, unit_file_state, control_group, result;
  pid_t main_pid = 0;
  int exec_main_status = 0;
  int exec_main_code = 0;  // CLD_EXITED 1, CLD_KILLED 2, CLD_DUMPED 3; 0: never ran
  int n_restarts = 0;
  bool need_reload = false;
  std::optional<Duration> timeout_stop;  // nullopt: infinity or unknown

  bool Loaded() const { return load_state == "loaded"; }
  bool Running() const {
    return active_state == "active" && sub_state == "running" && main_pid > 0;
  }
  bool Stopped() const { return active_state == "inactive" || active_state == "failed"; }
  bool Starting() const { return active_state == "activating" && sub_state != "auto-restart"; }
  bool Enabled() const {
    return unit_file_state == "enabled" || unit_file_state == "enabled-runtime";
  }
  // "active (running)"
  std::string State() const { return active_state + " (" + sub_state + ")"; }
  // How the last main process ended, "" when none has: "main process exited with status 1
  // (ExecMainStatus=1)".
  std::string MainExit() const {
    std::string status = "(ExecMainStatus=" + std::to_string(exec_main_status) + ")";
    switch (exec_main_code) {
      case 1:
        return "main process exited with status " + std::to_string(exec_main_status) +
               SystemdExitMeaning(exec_main_status) + " " + status;
      case 2:
        return "main process was killed by signal " + SignalName(exec_main_status) + " " + status;
      case 3:
        return "main process dumped core on signal " + SignalName(exec_main_status) + " " + status;
      default:
        return "";
    }
  }
};

UnitStatus ParseShow(std::string_view text) {
  UnitStatus st;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "LoadState")
      st.load_state = value;
    else if (key == "ActiveState")
      st.active_state = value;
    else if (key == "SubState")
      st.sub_state = value;
    else if (key == "UnitFileState")
      st.unit_file_state = value;
    else if (key == "ControlGroup")
      st.control_group = value;
    else if (key == "Result")
      st.result = value;
    else if (key == "MainPID")
      st.main_pid = ToInt<pid_t>(value);
    else if (key == "ExecMainStatus")
      st.exec_main_status = ToInt<int>(value);
    else if (key == "ExecMainCode")
      st.exec_main_code = ToInt<int>(value);
    else if (key == "NRestarts")
      st.n_restarts = ToInt<int>(value);
    else if (key == "NeedDaemonReload")
      st.need_reload = value == "yes";
    else if (key == "TimeoutStopUSec")
      st.timeout_stop = ParseSystemdTimespan(value);
  }
  return st;
}

Result<CommandOutput> Systemctl(std::vector<std::string> args, Duration timeout = kToolTimeout) {
  args.insert(args.begin(), "systemctl");
  return RunBlocking(args, timeout);
}

Result<UnitStatus> Show(const std::string& unit, Duration timeout = kToolTimeout) {
  auto out = Systemctl({"show", unit, "-p", kShowProperties, "--no-pager"}, timeout);
  if (!out.ok()) return out.status();
  if (!out->ok()) return Status::Error("systemctl show " + unit + ": " + out->Reason());
  return ParseShow(out->out);
}

// A systemctl verb that must succeed: "systemctl enable x.service: <its stderr's reason>".
Status RunVerb(const std::string& verb, const std::string& unit, Duration timeout = kToolTimeout) {
  std::vector<std::string> args = {verb};
  if (!unit.empty()) args.push_back(unit);
  auto out = Systemctl(args, timeout);
  if (!out.ok()) return out.status();
  if (!out->ok()) {
    return Status::Error("systemctl " + verb + (unit.empty() ? "" : " " + unit) +
                         " failed: " + out->Reason());
  }
  return Status::Ok();
}

std::string CgroupRoot() {
  const char* root = std::getenv("DEPLOYD_CGROUP_ROOT");
  return root && *root ? root : "/sys/fs/cgroup";
}

// The live processes in the unit's cgroup (cgroup v2). A cgroup that is gone, or a unit without
// one, has none; pids listed but no longer in /proc are gone too.
std::vector<pid_t> CgroupProcs(const UnitStatus& st) {
  std::vector<pid_t> pids;
  if (st.control_group.empty()) return pids;
  std::ifstream in(CgroupRoot() + st.control_group + "/cgroup.procs");
  pid_t pid = 0;
  while (in >> pid) {
    // cgroup v2 lists no zombies; a stale list (the stand-in's) may.
    auto stat = ReadProcStat(pid);
    if (stat && stat->state != 'Z' && stat->state != 'X') pids.push_back(pid);
  }
  return pids;
}

std::string NameList(const std::vector<pid_t>& pids) {
  std::string text;
  for (pid_t pid : pids) text += (text.empty() ? "" : ", ") + ProcessName(pid);
  return text;
}

std::string ProcessCount(size_t n) {
  return std::to_string(n) + (n == 1 ? " process" : " processes");
}

void SayJournal(const std::string& unit, const ActionContext& ctx) {
  auto out = RunBlocking(
      {"journalctl", "-u", unit, "-n", std::to_string(kJournalLines), "-o", "cat", "--no-pager"},
      kToolTimeout);
  if (!out.ok() || !out->ok()) {
    ctx.say("no journal for " + unit + ": " + (out.ok() ? out->Reason() : out.status().message()));
    return;
  }
  ctx.say("last journal lines of " + unit + ":");
  std::istringstream lines(out->out);
  std::string line;
  while (std::getline(lines, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (!line.empty()) ctx.say("  " + line);
  }
}

// ---------------------------------------------------------------- validation

bool IsUnitChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == ':' || c == '_' || c == '.' ||
         c == '\\' || c == '@' || c == '-';
}

// "kimi" -> "kimi.service", as systemctl itself completes it.
Result<std::string> NormalizeUnit(const std::string& unit) {
  if (unit.empty()) return Status::Error("service: no unit given");
  for (char c : unit) {
    if (!IsUnitChar(c) || unit.size() > 255) {
      return Status::Error("'" + unit + "' is not a valid systemd unit name");
    }
  }
  if (unit.find('.') == std::string::npos) return unit + ".service";
  return unit;
}

bool IsEnvName(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

bool HasControlChar(const std::string& text) {
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

// Checks what the unit file would carry; returns the action with exec[0] made absolute.
Result<ServiceAction> PrepareUnit(const ServiceAction& action, const std::string& unit) {
  ServiceAction out = action;
  out.unit = unit;
  if (unit.size() < 8 || unit.compare(unit.size() - 8, 8, ".service") != 0) {
    return Status::Error("exec needs a .service unit, not '" + unit + "'");
  }
  std::string& program = out.exec[0];
  if (program.empty()) return Status::Error("exec: the program (exec[0]) is empty");
  if (std::string_view("-@:+!").find(program[0]) != std::string_view::npos) {
    return Status::Error("exec: the program '" + program + "' starts with '" + program[0] +
                         "', which systemd reads as an ExecStart prefix");
  }
  if (program.find('/') == std::string::npos) {
    // systemd looks a bare name up in its own fixed directories, not in the PATH the plan was
    // written for (a venv's bin): the unit gets the program deployd would run.
    std::string found = FindOnPath(program);
    if (found.empty()) {
      return Status::Error("exec: '" + program + "' is not on PATH; give its absolute path");
    }
    program = found;
  } else if (program[0] != '/') {
    return Status::Error("exec: the program '" + program +
                         "' must be an absolute path or a name on PATH");
  }
  for (const auto& [name, value] : action.environment) {
    if (!IsEnvName(name)) {
      return Status::Error("environment: '" + name + "' is not a valid variable name");
    }
  }
  if (!action.working_directory.empty() &&
      (action.working_directory[0] != '/' || HasControlChar(action.working_directory))) {
    return Status::Error("working_directory '" + action.working_directory +
                         "' must be an absolute path");
  }
  for (char c : action.user) {
    if (std::isspace(static_cast<unsigned char>(c)) || HasControlChar(std::string(1, c))) {
      return Status::Error("user '" + action.user + "' is not a valid user name");
    }
  }
  return out;
}

// ---------------------------------------------------------------- rendering

// A word for systemd's parser (systemd.syntax(7), "Quoting"): double quotes when it needs any,
// C escapes inside them, `%` doubled (specifiers), `$` doubled where variables are expanded.
std::string QuoteWord(const std::string& word, bool escape_dollar) {
  bool quote = word.empty();
  std::string body;
  for (unsigned char c : word) {
    switch (c) {
      case '\\':
        body += "\\\\";
        quote = true;
        break;
      case '"':
        body += "\\\"";
        quote = true;
        break;
      case '\'':
        body += c;
        quote = true;
        break;
      case '\n':
        body += "\\n";
        quote = true;
        break;
      case '\t':
        body += "\\t";
        quote = true;
        break;
      case '\r':
        body += "\\r";
        quote = true;
        break;
      case ' ':
        body += c;
        quote = true;
        break;
      case '%':
        body += "%%";
        break;
      case '$':
        body += escape_dollar ? "$$" : "$";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\x%02x", c);
          body += hex;
          quote = true;
        } else {
          body += static_cast<char>(c);
        }
    }
  }
  return quote ? "\"" + body + "\"" : body;
}

// A value systemd takes to the end of the line after expanding specifiers (Description=,
// User=, WorkingDirectory=): one line, `%` doubled, no trailing backslash (a continuation).
std::string PlainValue(const std::string& value) {
  std::string out;
  for (unsigned char c : value) {
    if (c < 0x20 || c == 0x7f) {
      out += ' ';
    } else if (c == '%') {
      out += "%%";
    } else {
      out += static_cast<char>(c);
    }
  }
  while (!out.empty() && (out.back() == '\\' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string TimespanText(Duration d) {
  // TimeoutStopSec=0 would mean "no timeout": never write it.
  if (d.count() <= 0) d = 1s;
  if (d.count() % 1000 == 0) return std::to_string(d.count() / 1000) + "s";
  return std::to_string(d.count()) + "ms";
}

// ---------------------------------------------------------------- writing the unit file

// Writes `content` to `path` atomically (temp file, fsync, rename, fsync of the directory).
Status WriteFileAtomically(const std::string& path, const std::string& content) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : path.substr(0, slash);
  std::string tmp = dir + "/." + path.substr(slash + 1) + ".deployd-tmp";
  auto fail = [&](const std::string& what) {
    int err = errno;
    ::unlink(tmp.c_str());
    return Status::Error("cannot " + what + " " + path + ": " + std::strerror(err));
  };
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    return Status::Error("cannot write " + path + ": " + std::strerror(err));
  }
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      ::close(fd);
      return fail("write");
    }
    done += static_cast<size_t>(n);
  }
  // The umask must not decide who can read a unit file: systemd wants it world-readable.
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) {
    ::close(fd);
    return fail("write");
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("write");
  int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd >= 0) {
    ::fsync(dir_fd);
    ::close(dir_fd);
  }
  return Status::Ok();
}

// Writes the unit file when its content differs; true when it was written.
Result<bool> InstallUnitFile(const ServiceAction& action, const ActionContext& ctx) {
  std::string path = ctx.unit_dir + "/" + action.unit;
  std::string content = RenderUnitFile(action);
  std::ifstream in(path, std::ios::binary);
  if (in) {
    std::string current((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (current == content) {
      ctx.say("unit file " + path + " unchanged");
      return false;
    }
  }
  if (Status s = WriteFileAtomically(path, content); !s.ok()) return s;
  ctx.say("wrote " + path + " (ExecStart=" + QuoteExecArg(action.exec[0]) + " …)");
  return true;
}

// ---------------------------------------------------------------- enabled

Status ApplyEnabled(const std::string& unit, bool want, const ActionContext& ctx) {
  const char* word = want ? "enabled" : "disabled";
  auto st = Show(unit);
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
  if (Status s = RunVerb(want ? "enable" : "disable", unit); !s.ok()) return s;
  st = Show(unit);
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

// Waits until the processes `pids` have exited or `limit` has passed, on pidfds: the exit is
// seen the moment it happens.
void WaitUntilGone(std::vector<pid_t> pids, Duration limit) {
  KillOptions options;
  options.pids = std::move(pids);
  options.whole_groups = false;
  if (Result<KillPlan> plan = KillPlan::Select(options); plan.ok()) WaitUntilGone(*plan, limit);
}

// After a start the unit must keep running with the same main process for kSettle: a server
// that exits on a bad flag is caught here, the moment its main process exits. The journal's
// last lines are said when it does not.
Status ProveRunning(const std::string& unit, const ActionContext& ctx) {
  auto started = Show(unit);
  if (!started.ok()) return started.status();
  if ((started->Running() || started->Starting()) && started->main_pid > 0)
    WaitUntilGone({started->main_pid}, kSettle);
  auto st = Show(unit);
  if (!st.ok()) return st.status();
  if (!st->Running()) {
    SayJournal(unit, ctx);
    return Status::Error(NotRunning(unit, *st));
  }
  if ((started->main_pid > 0 && st->main_pid != started->main_pid) ||
      st->n_restarts > started->n_restarts) {
    SayJournal(unit, ctx);
    return Status::Error(unit + " restarted right after starting (main pid " +
                         std::to_string(started->main_pid) + ", then " +
                         std::to_string(st->main_pid) + "): it is crash-looping");
  }
  ctx.say(unit + " is active (running), main " + ProcessName(st->main_pid));
  return Status::Ok();
}

Status Start(const std::string& unit, const ServiceAction& action, bool restart,
             bool unit_file_changed, const ActionContext& ctx) {
  auto st = Show(unit);
  if (!st.ok()) return st.status();
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
      ctx.say(unit + " is already active (running), main " + ProcessName(st->main_pid) +
              "; nothing to do");
      return Status::Ok();
    }
    ctx.say("the unit file changed while " + unit + " was running: restarting it");
    restart = true;
  }
  if (st->active_state == "failed") {
    // An operator would do the same: a failed unit's start limit would refuse the start.
    ctx.say(unit + " had failed (Result=" + st->result + "); systemctl reset-failed");
    if (Status s = RunVerb("reset-failed", unit); !s.ok()) return s;
  }
  const char* verb = restart ? "restart" : "start";
  ctx.say(std::string("systemctl ") + verb + " " + unit);
  auto out = Systemctl({verb, unit}, action.start_timeout);
  if (!out.ok()) return out.status();
  if (!out->ok()) {
    std::string reason = out->Reason();
    auto after = Show(unit);
    SayJournal(unit, ctx);
    std::string exit = after.ok() ? after->MainExit() : "";
    return Status::Error(std::string("systemctl ") + verb + " " + unit + " failed: " + reason +
                         (exit.empty() ? "" : "; " + exit));
  }
  return ProveRunning(unit, ctx);
}

// ---------------------------------------------------------------- stopped

// "2 processes left in kimi.service's cgroup after stop: pid 123 (VLLM::Worker_TP0), …"
std::string LeftoverError(const std::string& unit, const std::vector<pid_t>& left,
                          const std::string& when) {
  return ProcessCount(left.size()) + " left in " + unit + "'s cgroup " + when + ": " +
         NameList(left);
}

Status Stop(const std::string& unit, const ServiceAction& action, const ActionContext& ctx) {
  auto st = Show(unit);
  if (!st.ok()) return st.status();
  if (st->Stopped()) {
    std::vector<pid_t> left = CgroupProcs(*st);
    if (!left.empty()) {
      return Status::Error(LeftoverError(unit, left, "although it is " + st->State()));
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
  st = Show(unit);
  if (!st.ok()) return st.status();
  if (!st->Stopped()) {
    SayJournal(unit, ctx);
    std::string main = st->main_pid > 0 ? ", main " + ProcessName(st->main_pid) : "";
    return Status::Error(unit + " did not stop: " + st->State() + main);
  }
  if (std::vector<pid_t> left = CgroupProcs(*st); !left.empty()) {
    WaitUntilGone(left, kDrain);
    left = CgroupProcs(*st);
    if (!left.empty()) return Status::Error(LeftoverError(unit, left, "after stop"));
  }
  std::string result =
      st->result.empty() || st->result == "success" ? "" : " (Result=" + st->result + ")";
  ctx.say(unit + " is stopped: " + st->State() + result + ", no process left in its cgroup");
  return Status::Ok();
}

}  // namespace

std::string QuoteExecArg(const std::string& arg) {
  // A lone ";" separates commands in ExecStart=; systemd.service(5) spells the literal "\;".
  if (arg == ";") return "\\;";
  return QuoteWord(arg, /*escape_dollar=*/true);
}

std::string RenderUnitFile(const ServiceAction& action) {
  std::map<std::string, std::string> env = {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"},
                                            {"HF_HUB_OFFLINE", "1"}};
  for (const auto& [name, value] : action.environment) env[name] = value;
  std::string exec;
  for (const std::string& arg : action.exec) exec += (exec.empty() ? "" : " ") + QuoteExecArg(arg);
  std::string description =
      action.description.empty() ? action.unit + " (deployd)" : action.description;

  std::string text;
  text += "# Written by deployd's `service` action: edit the plan, not this file; deployd\n";
  text += "# rewrites it when the plan's settings differ.\n";
  text += "[Unit]\n";
  text += "Description=" + PlainValue(description) + "\n";
  text += "After=network-online.target\n";
  text += "Wants=network-online.target\n";
  text += "# A server that keeps crashing ends up failed (start-limit-hit) instead of looping.\n";
  text += "StartLimitIntervalSec=1800\n";
  text += "StartLimitBurst=3\n";
  text += "\n[Service]\n";
  text += "# exec: a program that cannot be executed fails the start.\n";
  text += "Type=exec\n";
  text += "ExecStart=" + exec + "\n";
  if (!action.user.empty()) text += "User=" + PlainValue(action.user) + "\n";
  if (!action.working_directory.empty()) {
    text += "WorkingDirectory=" + PlainValue(action.working_directory) + "\n";
  }
  for (const auto& [name, value] : env) {
    text += "Environment=" + QuoteWord(name + "=" + value, /*escape_dollar=*/false) + "\n";
  }
  text += "# SIGTERM to the main process for an orderly shutdown, then SIGKILL to whatever is\n";
  text += "# left in the cgroup (workers included) at TimeoutStopSec.\n";
  text += "KillMode=mixed\n";
  text += "KillSignal=SIGTERM\n";
  text += "TimeoutStopSec=" + TimespanText(action.stop_timeout) + "\n";
  text += "# always, not on-failure: a dead engine can exit 0.\n";
  text += "Restart=always\n";
  text += "RestartSec=30s\n";
  text += "LimitNOFILE=1048576\n";
  text += "\n[Install]\n";
  text += "WantedBy=multi-user.target\n";
  return text;
}

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
    auto st = Show(*unit);
    if (!st.ok()) return st.status();
    // Also when an earlier attempt wrote the file but stopped before reloading.
    if (unit_file_changed || st->need_reload || !st->Loaded()) {
      ctx.say("systemctl daemon-reload");
      if (Status s = RunVerb("daemon-reload", ""); !s.ok()) return s;
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

CheckOutcome ProbeService(const Check& check) {
  CheckOutcome outcome;
  outcome.attempts = 1;
  outcome.evidence["check"] = "service";
  outcome.evidence["target"] = check.unit;
  auto finish = [&](bool passed, const std::string& what) {
    outcome.passed = passed;
    outcome.summary = "service " + check.unit + ": " + what;
    return outcome;
  };
  if (check.unit_state != "started" && check.unit_state != "stopped") {
    return finish(false, "unknown state '" + check.unit_state + "' (started or stopped)");
  }
  auto unit = NormalizeUnit(check.unit);
  if (!unit.ok()) return finish(false, unit.status().message());
  if (FindOnPath("systemctl").empty()) return finish(false, "systemctl not found on PATH");
  auto st = Show(*unit, check.timeout);
  if (!st.ok()) {
    outcome.evidence["error"] = st.status().message();
    return finish(false, st.status().message());
  }
  std::vector<pid_t> left = CgroupProcs(*st);
  boost::json::object& ev = outcome.evidence;
  ev["load_state"] = st->load_state;
  ev["active_state"] = st->active_state;
  ev["sub_state"] = st->sub_state;
  ev["main_pid"] = st->main_pid;
  ev["exec_main_status"] = st->exec_main_status;
  ev["exec_main_code"] = st->exec_main_code;
  ev["unit_file_state"] = st->unit_file_state;
  ev["cgroup"] = st->control_group;
  boost::json::array procs;
  for (pid_t pid : left) {
    auto info = ReadProcess(pid);
    procs.push_back(boost::json::object{{"pid", pid}, {"title", info ? info->Title() : "?"}});
  }
  ev["cgroup_procs"] = std::move(procs);

  bool passed = false;
  std::string what;
  if (st->load_state == "not-found" && st->Stopped()) {
    what = "not installed";
    passed = check.unit_state == "stopped";
  } else if (check.unit_state == "started") {
    passed = st->Running();
    what = st->State();
    if (st->main_pid > 0) what += ", main pid " + std::to_string(st->main_pid);
    if (!passed) {
      if (std::string exit = st->MainExit(); !exit.empty()) what += "; " + exit;
    }
  } else {
    passed = st->Stopped() && left.empty();
    what = st->State();
    if (!left.empty()) what += "; " + ProcessCount(left.size()) + " left in its cgroup";
  }
  if (check.enabled) {
    bool want = *check.enabled;
    if (st->Enabled() == want) {
      what += want ? ", enabled" : ", not enabled";
    } else {
      std::string file_state = st->unit_file_state.empty() ? "no unit file" : st->unit_file_state;
      what += "; " + file_state + (want ? " (expected enabled)" : " (expected disabled)");
      passed = false;
    }
  }
  return finish(passed, what);
}

}  // namespace deployd
