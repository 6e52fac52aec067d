#include "builtin_json.h"

#include <boost/json.hpp>

#include "format_size.h"
#include "plan_parser.h"

namespace deployd {

namespace json = boost::json;

namespace {

json::array Strings(const std::vector<std::string>& values) {
  json::array a;
  for (const auto& v : values) a.emplace_back(v);
  return a;
}

json::object StringMap(const std::map<std::string, std::string>& values) {
  json::object o;
  for (const auto& [k, v] : values) o[k] = v;
  return o;
}

json::array Ints(const std::vector<int>& values) {
  json::array a;
  for (int v : values) a.emplace_back(v);
  return a;
}

// Readers over a request this daemon wrote: a missing or mistyped field keeps the default
// (the request is never written by hand).
struct Reader {
  const json::object& o;

  std::string Str(std::string_view key) const {
    const json::value* v = o.if_contains(key);
    return v && v->is_string() ? std::string(v->as_string()) : std::string();
  }
  bool Bool(std::string_view key, bool fallback) const {
    const json::value* v = o.if_contains(key);
    return v && v->is_bool() ? v->as_bool() : fallback;
  }
  std::optional<std::uint64_t> U64(std::string_view key) const {
    const json::value* v = o.if_contains(key);
    if (v && v->is_uint64()) return v->as_uint64();
    if (v && v->is_int64() && v->as_int64() >= 0) return static_cast<std::uint64_t>(v->as_int64());
    return std::nullopt;
  }
  Duration Ms(std::string_view key, Duration fallback) const {
    std::optional<std::uint64_t> ms = U64(key);
    return ms ? Duration(static_cast<std::int64_t>(*ms)) : fallback;
  }
  std::vector<std::string> Strs(std::string_view key) const {
    std::vector<std::string> out;
    const json::value* v = o.if_contains(key);
    if (v && v->is_array())
      for (const auto& e : v->as_array())
        if (e.is_string()) out.emplace_back(e.as_string());
    return out;
  }
  std::map<std::string, std::string> StrMap(std::string_view key) const {
    std::map<std::string, std::string> out;
    const json::value* v = o.if_contains(key);
    if (v && v->is_object())
      for (const auto& [k, e] : v->as_object())
        if (e.is_string()) out[std::string(k)] = std::string(e.as_string());
    return out;
  }
  std::vector<int> Ints(std::string_view key) const {
    std::vector<int> out;
    const json::value* v = o.if_contains(key);
    if (v && v->is_array())
      for (const auto& e : v->as_array())
        if (e.is_int64()) out.push_back(static_cast<int>(e.as_int64()));
    return out;
  }
};

json::object GpuToJson(const GpuSelection& gpu) {
  return {{"gpus", Ints(gpu.gpus)}, {"max_used", gpu.max_used}};
}
GpuSelection GpuFromJson(const Reader& r) {
  GpuSelection gpu;
  gpu.gpus = r.Ints("gpus");
  gpu.max_used = r.U64("max_used").value_or(gpu.max_used);
  return gpu;
}

Result<json::object> ParseObject(std::string_view text, std::string_view what) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object())
    return Status::Error("invalid " + std::string(what) + " request (expected a JSON object)");
  return std::move(v.as_object());
}

}  // namespace

std::string_view ActionKindName(ActionKind kind) {
  switch (kind) {
    case ActionKind::kRun: return "run";
    case ActionKind::kApproval: return "approval";
    case ActionKind::kService: return "service";
    case ActionKind::kKill: return "kill";
    case ActionKind::kGpusFree: return "gpus_free";
    case ActionKind::kRemove: return "remove";
    case ActionKind::kDownload: return "download";
  }
  return "unknown";
}

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
      return which +
             " free (memory used at most " + FormatSize(a.gpu.max_used) + ", for " +
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
  o["kind"] = ActionKindName(step.kind);
  o["secrets"] = Strings(step.secrets);
  o["unit_dir"] = context.unit_dir;
  o["allowed_roots"] = Strings(context.allowed_roots);
  o["state_dir"] = context.state_dir;
  switch (step.kind) {
    case ActionKind::kService: {
      const ServiceAction& a = step.service;
      o["unit"] = a.unit;
      o["state"] = a.state;
      if (a.enabled) o["enabled"] = *a.enabled;
      o["exec"] = Strings(a.exec);
      o["environment"] = StringMap(a.environment);
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
      o["include"] = Strings(a.include);
      o["exclude"] = Strings(a.exclude);
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
  Result<json::object> parsed = ParseObject(text, "action");
  if (!parsed.ok()) return parsed.status();
  Reader r{parsed.value()};
  BuiltinRequest q;
  std::string kind = r.Str("kind");
  for (ActionKind k : {ActionKind::kService, ActionKind::kKill, ActionKind::kGpusFree,
                       ActionKind::kRemove, ActionKind::kDownload})
    if (kind == ActionKindName(k)) q.kind = k;
  if (q.kind == ActionKind::kRun) return Status::Error("unknown built-in action '" + kind + "'");
  q.secrets = r.Strs("secrets");
  q.context.unit_dir = r.Str("unit_dir");
  q.context.allowed_roots = r.Strs("allowed_roots");
  q.context.state_dir = r.Str("state_dir");
  switch (q.kind) {
    case ActionKind::kService: {
      ServiceAction& a = q.service;
      a.unit = r.Str("unit");
      a.state = r.Str("state");
      if (const json::value* v = r.o.if_contains("enabled"); v && v->is_bool()) a.enabled = v->as_bool();
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
        a.gpu = GpuFromJson(Reader{g->as_object()});
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

std::string ProbeRequestJson(const Check& check) {
  json::object o;
  switch (check.kind) {
    case CheckKind::kService:
      o["kind"] = "service";
      o["unit"] = check.unit;
      o["state"] = check.unit_state;
      if (check.enabled) o["enabled"] = *check.enabled;
      break;
    case CheckKind::kProcess:
      o["kind"] = "process";
      o["match"] = check.match;
      o["absent"] = check.absent;
      break;
    case CheckKind::kGpusFree:
      o["kind"] = "gpus_free";
      o["gpu"] = GpuToJson(check.gpu);
      break;
    case CheckKind::kWeightsComplete:
      o["kind"] = "weights_complete";
      o["path"] = check.path;
      o["sha256"] = StringMap(check.sha256);
      break;
    default:
      o["kind"] = "unsupported";
      break;
  }
  return json::serialize(o);
}

Result<Check> ParseProbeRequest(std::string_view text) {
  Result<json::object> parsed = ParseObject(text, "probe");
  if (!parsed.ok()) return parsed.status();
  Reader r{parsed.value()};
  Check check;
  std::string kind = r.Str("kind");
  if (kind == "service") {
    check.kind = CheckKind::kService;
    check.unit = r.Str("unit");
    check.unit_state = r.Str("state");
    if (const json::value* v = r.o.if_contains("enabled"); v && v->is_bool()) check.enabled = v->as_bool();
  } else if (kind == "process") {
    check.kind = CheckKind::kProcess;
    check.match = r.Str("match");
    check.absent = r.Bool("absent", false);
  } else if (kind == "gpus_free") {
    check.kind = CheckKind::kGpusFree;
    if (const json::value* g = r.o.if_contains("gpu"); g && g->is_object())
      check.gpu = GpuFromJson(Reader{g->as_object()});
  } else if (kind == "weights_complete") {
    check.kind = CheckKind::kWeightsComplete;
    check.path = r.Str("path");
    check.sha256 = r.StrMap("sha256");
  } else {
    return Status::Error("unknown probe kind '" + kind + "'");
  }
  return check;
}

}  // namespace deployd
