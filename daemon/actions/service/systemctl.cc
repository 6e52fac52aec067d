#include "actions/service/systemctl.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string_view>

#include "process/exit_status.h"
#include "process/process_table.h"
#include "process/spawn.h"

namespace deployd {
namespace {

constexpr char kShowProperties[] =
    "LoadState,ActiveState,SubState,MainPID,ExecMainStatus,ExecMainCode,UnitFileState,"
    "ControlGroup,NRestarts,Result,NeedDaemonReload,TimeoutStopUSec,InvocationID";

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
    else if (key == "InvocationID")
      st.invocation_id = value;
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

bool IsUnitChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == ':' || c == '_' || c == '.' ||
         c == '\\' || c == '@' || c == '-';
}

}  // namespace

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

std::string UnitStatus::MainExit() const {
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

Result<CommandOutput> Systemctl(std::vector<std::string> args, Duration timeout) {
  args.insert(args.begin(), "systemctl");
  return RunBlocking(args, timeout);
}

Result<UnitStatus> ShowUnit(const std::string& unit, Duration timeout) {
  auto out = Systemctl({"show", unit, "-p", kShowProperties, "--no-pager"}, timeout);
  if (!out.ok()) return out.status();
  if (!out->ok()) return Status::Error("systemctl show " + unit + ": " + out->Reason());
  return ParseShow(out->out);
}

Status SystemctlVerb(const std::string& verb, const std::string& unit, Duration timeout) {
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

std::string DescribePids(const std::vector<pid_t>& pids) {
  std::string text;
  for (pid_t pid : pids) text += (text.empty() ? "" : ", ") + DescribePid(pid);
  return text;
}

std::string ProcessCount(size_t n) {
  return std::to_string(n) + (n == 1 ? " process" : " processes");
}

std::string DescribePid(pid_t pid) {
  auto info = ReadProcess(pid);
  std::string title = info ? info->Title() : "?";
  return "pid " + std::to_string(pid) + " (" + title + ")";
}

}  // namespace deployd
