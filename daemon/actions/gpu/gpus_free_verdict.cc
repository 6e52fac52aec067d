#include "actions/gpu/gpus_free_verdict.h"

#include <algorithm>
#include <boost/json/array.hpp>

namespace deployd {
namespace {

namespace json = boost::json;

// "70GiB", "70.2GiB", "512MiB": one decimal unless whole in its unit.
std::string BytesText(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  std::uint64_t scale = 1;
  while (unit + 1 < 5 && bytes / scale >= 1024) {
    scale *= 1024;
    ++unit;
  }
  std::uint64_t whole = bytes / scale;
  std::uint64_t tenths = (bytes % scale) * 10 / scale;
  std::string text = std::to_string(whole);
  if (tenths != 0) text += "." + std::to_string(tenths);
  return text + kUnits[unit];
}

std::string ProcessText(const GpuProcess& p) {
  return "pid " + std::to_string(p.pid) + " (" + (p.name.empty() ? "?" : p.name) + ")";
}

json::value OptionalBytes(const std::optional<std::uint64_t>& bytes) {
  if (!bytes) return nullptr;
  return *bytes;
}

}  // namespace

GpusFreeResult EvaluateGpusFree(const GpuSnapshot& snapshot, const std::vector<int>& gpu_indices,
                                std::uint64_t max_used_bytes) {
  std::vector<int> wanted = gpu_indices;
  if (wanted.empty()) {
    for (const GpuInfo& gpu : snapshot.gpus) wanted.push_back(gpu.index);
  }
  std::string present_list;
  for (const GpuInfo& gpu : snapshot.gpus) {
    if (!present_list.empty()) present_list += ",";
    present_list += std::to_string(gpu.index);
  }

  GpusFreeResult result;
  result.all_free = !wanted.empty();
  json::array gpus_json;
  std::uint64_t highest_used = 0;
  for (int index : wanted) {
    GpuFreeVerdict verdict;
    verdict.index = index;
    json::object gpu_json;
    gpu_json["index"] = index;
    const GpuInfo* gpu = snapshot.FindIndex(index);
    if (!gpu) {
      verdict.reasons.push_back("no such GPU (GPUs: " +
                                (present_list.empty() ? std::string("none") : present_list) + ")");
    } else {
      verdict.present = true;
      verdict.uuid = gpu->uuid;
      verdict.memory_used_bytes = gpu->memory_used_bytes;
      verdict.processes = gpu->processes;
      for (const GpuProcess& p : gpu->processes) {
        verdict.reasons.push_back(ProcessText(p) + " holds " +
                                  (p.used_memory_bytes ? BytesText(*p.used_memory_bytes)
                                                       : std::string("memory (amount unknown)")));
      }
      if (!gpu->processes_unknown.empty()) {
        verdict.reasons.push_back("process list unknown (" + gpu->processes_unknown + ")");
      }
      for (const auto& [uuid, p] : snapshot.unplaced_processes) {
        verdict.reasons.push_back(ProcessText(p) + " runs on " + uuid +
                                  ", which is not in the GPU list");
      }
      if (!gpu->memory_used_bytes) {
        verdict.reasons.push_back("memory used unknown");
      } else if (*gpu->memory_used_bytes > max_used_bytes) {
        verdict.reasons.push_back("memory used " + BytesText(*gpu->memory_used_bytes) + ", max " +
                                  BytesText(max_used_bytes));
      } else {
        highest_used = std::max(highest_used, *gpu->memory_used_bytes);
      }
      gpu_json["uuid"] = gpu->uuid;
      gpu_json["name"] = gpu->name;
      gpu_json["memory_used_bytes"] = OptionalBytes(gpu->memory_used_bytes);
      gpu_json["memory_total_bytes"] = OptionalBytes(gpu->memory_total_bytes);
      json::array processes_json;
      for (const GpuProcess& p : gpu->processes) {
        processes_json.push_back(
            json::object{{"pid", p.pid},
                         {"name", p.name},
                         {"used_memory_bytes", OptionalBytes(p.used_memory_bytes)}});
      }
      gpu_json["processes"] = std::move(processes_json);
    }
    verdict.free = verdict.reasons.empty();
    result.all_free = result.all_free && verdict.free;
    gpu_json["free"] = verdict.free;
    json::array reasons_json;
    for (const std::string& r : verdict.reasons) reasons_json.push_back(json::string(r));
    gpu_json["reasons"] = std::move(reasons_json);
    gpus_json.push_back(std::move(gpu_json));
    result.gpus.push_back(std::move(verdict));
  }

  std::string list;
  for (int index : wanted) {
    if (!list.empty()) list += ",";
    list += std::to_string(index);
  }
  std::string summary = "gpus_free " + (list.empty() ? std::string("(all)") : list) + ": ";
  if (wanted.empty()) {
    summary += "no GPU found (" + std::string(GpuSourceName(snapshot.source)) + ")";
  } else if (result.all_free) {
    summary += "free (no compute process; memory used at most " + BytesText(highest_used) +
               ", max " + BytesText(max_used_bytes) + "; " +
               std::string(GpuSourceName(snapshot.source)) + ")";
  } else {
    bool first = true;
    for (const GpuFreeVerdict& v : result.gpus) {
      if (v.free) continue;
      if (!first) summary += "; ";
      first = false;
      summary += "GPU " + std::to_string(v.index) + ": ";
      for (size_t i = 0; i < v.reasons.size(); ++i) {
        if (i) summary += ", ";
        summary += v.reasons[i];
      }
    }
  }
  result.summary = std::move(summary);
  result.evidence["check"] = "gpus_free";
  result.evidence["source"] = std::string(GpuSourceName(snapshot.source));
  result.evidence["max_used_bytes"] = max_used_bytes;
  result.evidence["gpus"] = std::move(gpus_json);
  return result;
}

}  // namespace deployd
