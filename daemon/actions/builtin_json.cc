#include "actions/builtin_json.h"

#include <boost/json.hpp>

#include "checks/probe_request.h"
#include "util/json_fields.h"
#include "util/units.h"

namespace deployd {

namespace json = boost::json;

std::string DescribeAction(const Step& step) {
  auto join = [](const std::vector<std::string>& v, std::string_view sep) {
    std::string out;
    for (const auto& e : v) out += (out.empty() ? "" : std::string(sep)) + e;
    return out;
  };
  switch (step.kind) {
    case ActionKind::kService: {
      const ServiceAction& a = step.service;
      std::vector<std::string> what;
      if (!a.state.empty()) what.push_back(a.state);
      if (a.enabled) what.push_back(*a.enabled ? "enabled" : "disabled");
      std::string text = a.unit + (what.empty() ? "" : ": " + join(what, ", "));
      if (!a.exec.empty()) text += " (unit file with ExecStart=" + join(a.exec, " ") + ")";
      return text;
    }
    case ActionKind::kKill:
      return "processes matching '" + step.kill.match + "'" +
             (step.kill.whole_groups ? " and their process groups" : "") +
             ": SIGTERM, SIGKILL after " + FormatDuration(step.kill.grace);
    case ActionKind::kGpusFree: {
      const GpusFreeAction& a = step.gpus_free;
      std::vector<std::string> gpus;
      for (int g : a.gpu.gpus) gpus.push_back(std::to_string(g));
      std::string which = gpus.empty()       ? "every GPU"
                          : gpus.size() == 1 ? "GPU " + gpus[0]
                                             : "GPUs " + join(gpus, ",");
      return which + " free (memory used at most " + FormatSize(a.gpu.max_used) + ", for " +
             FormatDuration(a.stable_for) + ", within " + FormatDuration(a.within) +
             (a.kill ? "; holders stopped, SIGKILL after " + FormatDuration(a.grace) : "") + ")";
    }
    case ActionKind::kRemove:
      return step.remove.path;
    case ActionKind::kDownload: {
      const DownloadAction& a = step.download;
      std::string text = a.repo + (a.revision.empty() ? "" : "@" + a.revision) + " into " + a.to;
      if (a.size) text += " (" + FormatSize(*a.size) + ")";
      return text;
    }
    case ActionKind::kRun:
    case ActionKind::kApproval:
      break;
  }
  return "";
}

std::string ActionRequestJson(const Step& step, const ActionContext& context) {
  json::object o;
  o["kind"] = ToString(step.kind);
  o["secrets"] = JsonStrings(step.secrets);
  o["unit_dir"] = context.unit_dir;
  o["allowed_roots"] = JsonStrings(context.allowed_roots);
  o["state_dir"] = context.state_dir;
  switch (step.kind) {
    case ActionKind::kService: {
      const ServiceAction& a = step.service;
      o["unit"] = a.unit;
      o["state"] = a.state;
      if (a.enabled) o["enabled"] = *a.enabled;
      o["exec"] = JsonStrings(a.exec);
      o["environment"] = JsonStringMap(a.environment);
      o["user"] = a.user;
      o["working_directory"] = a.working_directory;
      o["description"] = a.description;
      o["stop_timeout_ms"] = a.stop_timeout.count();
      o["start_timeout_ms"] = a.start_timeout.count();
      break;
    }
    case ActionKind::kKill:
      o["match"] = step.kill.match;
      o["grace_ms"] = step.kill.grace.count();
      o["whole_groups"] = step.kill.whole_groups;
      break;
    case ActionKind::kGpusFree: {
      const GpusFreeAction& a = step.gpus_free;
      o["gpu"] = GpuToJson(a.gpu);
      o["stable_for_ms"] = a.stable_for.count();
      o["every_ms"] = a.every.count();
      o["within_ms"] = a.within.count();
      o["kill"] = a.kill;
      o["grace_ms"] = a.grace.count();
      break;
    }
    case ActionKind::kRemove:
      o["path"] = step.remove.path;
      break;
    case ActionKind::kDownload: {
      const DownloadAction& a = step.download;
      o["repo"] = a.repo;
      o["to"] = a.to;
      o["revision"] = a.revision;
      o["include"] = JsonStrings(a.include);
      o["exclude"] = JsonStrings(a.exclude);
      if (a.size) o["size"] = *a.size;
      break;
    }
    case ActionKind::kRun:
    case ActionKind::kApproval:
      break;
  }
  return json::serialize(o);
}

Result<BuiltinRequest> ParseActionRequest(std::string_view text) {
  Result<json::object> parsed = ParseJsonObject(text, "action");
  if (!parsed.ok()) return parsed.status();
  JsonFields r{parsed.value()};
  BuiltinRequest q;
  std::string kind = r.Str("kind");
  std::optional<ActionKind> parsed_kind = ParseActionKind(kind);
  if (!parsed_kind || *parsed_kind == ActionKind::kRun || *parsed_kind == ActionKind::kApproval)
    return Status::Error("unknown built-in action '" + kind + "'");
  q.kind = *parsed_kind;
  q.secrets = r.Strs("secrets");
  q.context.unit_dir = r.Str("unit_dir");
  q.context.allowed_roots = r.Strs("allowed_roots");
  q.context.state_dir = r.Str("state_dir");
  switch (q.kind) {
    case ActionKind::kService: {
      ServiceAction& a = q.service;
      a.unit = r.Str("unit");
      a.state = r.Str("state");
      if (const json::value* v = r.o.if_contains("enabled"); v && v->is_bool())
        a.enabled = v->as_bool();
      a.exec = r.Strs("exec");
      a.environment = r.StrMap("environment");
      a.user = r.Str("user");
      a.working_directory = r.Str("working_directory");
      a.description = r.Str("description");
      a.stop_timeout = r.Ms("stop_timeout_ms", a.stop_timeout);
      a.start_timeout = r.Ms("start_timeout_ms", a.start_timeout);
      break;
    }
    case ActionKind::kKill:
      q.kill.match = r.Str("match");
      q.kill.grace = r.Ms("grace_ms", q.kill.grace);
      q.kill.whole_groups = r.Bool("whole_groups", true);
      break;
    case ActionKind::kGpusFree: {
      GpusFreeAction& a = q.gpus_free;
      if (const json::value* g = r.o.if_contains("gpu"); g && g->is_object())
        a.gpu = GpuFromJson(JsonFields{g->as_object()});
      a.stable_for = r.Ms("stable_for_ms", a.stable_for);
      a.every = r.Ms("every_ms", a.every);
      a.within = r.Ms("within_ms", a.within);
      a.kill = r.Bool("kill", false);
      a.grace = r.Ms("grace_ms", a.grace);
      break;
    }
    case ActionKind::kRemove:
      q.remove.path = r.Str("path");
      break;
    case ActionKind::kDownload: {
      DownloadAction& a = q.download;
      a.repo = r.Str("repo");
      a.to = r.Str("to");
      a.revision = r.Str("revision");
      a.include = r.Strs("include");
      a.exclude = r.Strs("exclude");
      a.size = r.U64("size");
      break;
    }
    case ActionKind::kRun:
    case ActionKind::kApproval:
      break;
  }
  return q;
}

}  // namespace deployd
