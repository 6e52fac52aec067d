#include "checks/probe_request.h"

#include <boost/json.hpp>

namespace deployd {

namespace json = boost::json;

json::object GpuToJson(const GpuSelection& gpu) {
  return {{"gpus", JsonInts(gpu.gpus)}, {"max_used", gpu.max_used}};
}
GpuSelection GpuFromJson(const JsonFields& r) {
  GpuSelection gpu;
  gpu.gpus = r.Ints("gpus");
  gpu.max_used = r.U64("max_used").value_or(gpu.max_used);
  return gpu;
}

std::string ProbeRequestJson(const Check& check) {
  json::object o;
  o["kind"] = ToString(check.kind);
  switch (check.kind) {
    case CheckKind::kService:
      o["unit"] = check.unit;
      o["state"] = check.unit_state;
      if (check.enabled) o["enabled"] = *check.enabled;
      break;
    case CheckKind::kProcess:
      o["match"] = check.match;
      o["absent"] = check.absent;
      break;
    case CheckKind::kGpusFree:
      o["gpu"] = GpuToJson(check.gpu);
      break;
    case CheckKind::kWeightsComplete:
      o["path"] = check.path;
      o["sha256"] = JsonStringMap(check.sha256);
      break;
    default:
      o["kind"] = "unsupported";  // not a probe that runs in a child
      break;
  }
  return json::serialize(o);
}

Result<Check> ParseProbeRequest(std::string_view text) {
  Result<json::object> parsed = ParseJsonObject(text, "probe");
  if (!parsed.ok()) return parsed.status();
  JsonFields r{parsed.value()};
  Check check;
  std::string kind = r.Str("kind");
  std::optional<CheckKind> parsed_kind = ParseCheckKind(kind);
  if (!parsed_kind) return Status::Error("unknown probe kind '" + kind + "'");
  check.kind = *parsed_kind;
  if (check.kind == CheckKind::kService) {
    check.unit = r.Str("unit");
    check.unit_state = r.Str("state");
    if (const json::value* v = r.o.if_contains("enabled"); v && v->is_bool())
      check.enabled = v->as_bool();
  } else if (check.kind == CheckKind::kProcess) {
    check.match = r.Str("match");
    check.absent = r.Bool("absent", false);
  } else if (check.kind == CheckKind::kGpusFree) {
    if (const json::value* g = r.o.if_contains("gpu"); g && g->is_object())
      check.gpu = GpuFromJson(JsonFields{g->as_object()});
  } else if (check.kind == CheckKind::kWeightsComplete) {
    check.path = r.Str("path");
    check.sha256 = r.StrMap("sha256");
  } else {
    return Status::Error("unknown probe kind '" + kind + "'");
  }
  return check;
}

}  // namespace deployd
