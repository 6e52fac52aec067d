#include "actions/gpu/nvidia_smi.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>

namespace deployd {
namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) {
    s.remove_suffix(1);
  }
  return s;
}

std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(pos, end - pos));
    pos = end + 1;
  }
  return lines;
}

// Splits a row into `count` fields where the field at `free_index` may itself contain commas
// (a GPU or process name): the fields before it and after it are taken from the two ends.
std::optional<std::vector<std::string_view>> SplitRow(std::string_view line, size_t count,
                                                      size_t free_index) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  for (;;) {
    size_t comma = line.find(',', pos);
    if (comma == std::string_view::npos) {
      parts.push_back(line.substr(pos));
      break;
    }
    parts.push_back(line.substr(pos, comma - pos));
    pos = comma + 1;
  }
  if (parts.size() < count) return std::nullopt;
  size_t extra = parts.size() - count;
  std::vector<std::string_view> fields;
  for (size_t i = 0; i < count; ++i) {
    if (i < free_index) {
      fields.push_back(Trim(parts[i]));
    } else if (i == free_index) {
      const char* begin = parts[i].data();
      const char* end = parts[i + extra].data() + parts[i + extra].size();
      fields.push_back(Trim(std::string_view(begin, static_cast<size_t>(end - begin))));
    } else {
      fields.push_back(Trim(parts[i + extra]));
    }
  }
  return fields;
}

template <typename T>
bool ParseInteger(std::string_view text, T& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// A MiB figure: "81559", "81559 MiB" (when units were not suppressed), or a bracketed
// placeholder such as "[N/A]" / "[Not Supported]" / "[Insufficient Permissions]" → unknown.
// Returns false when the text is none of these.
bool ParseMiB(std::string_view text, std::optional<std::uint64_t>& out) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') {
    out.reset();
    return true;
  }
  if (text == "N/A") {
    out.reset();
    return true;
  }
  if (text.size() > 3 && text.substr(text.size() - 3) == "MiB") {
    text = Trim(text.substr(0, text.size() - 3));
  }
  std::uint64_t mib = 0;
  if (!ParseInteger(text, mib) || mib > UINT64_MAX / kMiB) return false;
  out = mib * kMiB;
  return true;
}

Status RowError(std::string_view query, size_t line_number, std::string_view line,
                const std::string& what) {
  return Status::Error("nvidia-smi " + std::string(query) + " line " + std::to_string(line_number) +
                       ": " + what + ": \"" + std::string(Trim(line)) + "\"");
}

}  // namespace

std::vector<std::string> NvidiaSmiGpuQuery() {
  return {"nvidia-smi", "--query-gpu=index,uuid,name,memory.used,memory.total",
          "--format=csv,noheader,nounits"};
}

std::vector<std::string> NvidiaSmiAppsQuery() {
  return {"nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
          "--format=csv,noheader,nounits"};
}

Result<GpuSnapshot> ParseNvidiaSmi(std::string_view gpu_csv, std::string_view apps_csv) {
  GpuSnapshot snapshot;
  snapshot.source = GpuSource::kNvidiaSmi;
  std::map<std::string, size_t, std::less<>> by_uuid;

  constexpr std::string_view kGpuQuery = "--query-gpu";
  size_t line_number = 0;
  for (std::string_view line : SplitLines(gpu_csv)) {
    ++line_number;
    if (Trim(line).empty()) continue;
    auto fields = SplitRow(line, 5, 2);
    if (!fields) {
      size_t got = static_cast<size_t>(std::count(line.begin(), line.end(), ',')) + 1;
      return RowError(kGpuQuery, line_number, line,
                      "expected 5 fields (index, uuid, name, memory.used, memory.total), got " +
                          std::to_string(got));
    }
    const auto& f = *fields;
    if (line_number == 1 && f[0] == "index") continue;  // a header, if csv had one
    GpuInfo gpu;
    if (!ParseInteger(f[0], gpu.index) || gpu.index < 0) {
      return RowError(kGpuQuery, line_number, line, "bad index '" + std::string(f[0]) + "'");
    }
    if (f[1].empty() || f[1].front() == '[') {
      return RowError(kGpuQuery, line_number, line, "bad uuid '" + std::string(f[1]) + "'");
    }
    gpu.uuid = std::string(f[1]);
    gpu.name = std::string(f[2]);
    if (!ParseMiB(f[3], gpu.memory_used_bytes)) {
      return RowError(kGpuQuery, line_number, line,
                      "bad memory.used '" + std::string(f[3]) + "' (MiB expected)");
    }
    if (!ParseMiB(f[4], gpu.memory_total_bytes)) {
      return RowError(kGpuQuery, line_number, line,
                      "bad memory.total '" + std::string(f[4]) + "' (MiB expected)");
    }
    if (by_uuid.count(gpu.uuid) || snapshot.FindIndex(gpu.index)) {
      return RowError(kGpuQuery, line_number, line, "GPU listed twice");
    }
    by_uuid[gpu.uuid] = snapshot.gpus.size();
    snapshot.gpus.push_back(std::move(gpu));
  }

  constexpr std::string_view kAppsQuery = "--query-compute-apps";
  line_number = 0;
  for (std::string_view line : SplitLines(apps_csv)) {
    ++line_number;
    std::string_view trimmed = Trim(line);
    if (trimmed.empty() || trimmed == "No running processes found") continue;
    auto fields = SplitRow(line, 4, 2);
    if (!fields) {
      size_t got = static_cast<size_t>(std::count(line.begin(), line.end(), ',')) + 1;
      return RowError(kAppsQuery, line_number, line,
                      "expected 4 fields (gpu_uuid, pid, process_name, used_memory), got " +
                          std::to_string(got));
    }
    const auto& f = *fields;
    if (line_number == 1 && f[0] == "gpu_uuid") continue;
    GpuProcess process;
    if (!ParseInteger(f[1], process.pid) || process.pid <= 0) {
      return RowError(kAppsQuery, line_number, line, "bad pid '" + std::string(f[1]) + "'");
    }
    process.name = std::string(f[2]);
    if (!ParseMiB(f[3], process.used_memory_bytes)) {
      return RowError(kAppsQuery, line_number, line,
                      "bad used_memory '" + std::string(f[3]) + "' (MiB expected)");
    }
    auto it = by_uuid.find(f[0]);
    if (it == by_uuid.end()) {
      snapshot.unplaced_processes.emplace_back(std::string(f[0]), std::move(process));
    } else {
      snapshot.gpus[it->second].processes.push_back(std::move(process));
    }
  }
  std::sort(snapshot.gpus.begin(), snapshot.gpus.end(),
            [](const GpuInfo& a, const GpuInfo& b) { return a.index < b.index; });
  return snapshot;
}

Result<GpuSnapshot> ReadNvidiaSmi(const CommandRunner& run) {
  auto gpus = run(NvidiaSmiGpuQuery());
  if (!gpus.ok()) return gpus.status();
  auto apps = run(NvidiaSmiAppsQuery());
  if (!apps.ok()) return apps.status();
  return ParseNvidiaSmi(gpus.value(), apps.value());
}

}  // namespace deployd
