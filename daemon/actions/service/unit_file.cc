#include "actions/service/unit_file.h"

#include <cctype>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <string_view>

#include "actions/service/systemctl.h"
#include "util/atomic_file.h"

namespace deployd {
namespace {

using namespace std::chrono_literals;

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
  // The umask must not decide who can read a unit file: systemd wants it world-readable.
  if (Status s = WriteFileAtomically(path, content, 0644); !s.ok()) return s;
  ctx.say("wrote " + path + " (ExecStart=" + QuoteExecArg(action.exec[0]) + " …)");
  return true;
}

}  // namespace deployd
