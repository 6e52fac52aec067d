#include "actions/gpu/gpu_state.h"

#include <dlfcn.h>

#include <algorithm>
#include <boost/json/array.hpp>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <map>

#include "process/blocking_command.h"
#include "process/process_table.h"

namespace deployd {
namespace {

namespace json = boost::json;

constexpr std::uint64_t kMiB = 1024 * 1024;

// ---------------------------------------------------------------------------------------------
// nvidia-smi CSV

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

// ---------------------------------------------------------------------------------------------
// Formatting

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

// ---------------------------------------------------------------------------------------------
// NVML: declared here (no NVIDIA headers are needed to build deployd). Values from nvml.h.

using nvmlReturn_t = int;
struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

constexpr nvmlReturn_t NVML_SUCCESS = 0;
constexpr nvmlReturn_t NVML_ERROR_NOT_SUPPORTED = 3;
constexpr nvmlReturn_t NVML_ERROR_NO_PERMISSION = 4;
constexpr nvmlReturn_t NVML_ERROR_INSUFFICIENT_SIZE = 7;
constexpr nvmlReturn_t NVML_ERROR_DRIVER_NOT_LOADED = 9;
constexpr nvmlReturn_t NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18;
constexpr unsigned long long NVML_VALUE_NOT_AVAILABLE = ~0ULL;
constexpr unsigned int kNvmlStringBufferSize = 96;  // NVML_DEVICE_{UUID,NAME}_V2_BUFFER_SIZE

struct nvmlMemory_t {  // v1: what nvmlDeviceGetMemoryInfo fills
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

// The entry nvmlDeviceGetComputeRunningProcesses_v3 (and _v2) fills on current drivers.
struct nvmlProcessInfo_v2_t {
  unsigned int pid;
  unsigned long long usedGpuMemory;
  unsigned int gpuInstanceId;
  unsigned int computeInstanceId;
};
static_assert(sizeof(nvmlProcessInfo_v2_t) == 24, "NVML ABI: 24-byte process entries");
// One driver generation's _v3 wrote a longer entry (nvml.h of CUDA 12.2 added a field that was
// later taken out again). Buffers are sized for this one, so guessing the stride wrong can
// misread but never overrun.
constexpr size_t kLongProcessEntry = 32;

}  // namespace

// The resolved entry points. Pointers to C functions, called through the C ABI.
struct NvmlSession::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*get_count)(unsigned int*) = nullptr;
  nvmlReturn_t (*get_handle)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*get_uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*get_memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
  nvmlReturn_t (*get_processes)(nvmlDevice_t, unsigned int*, void*) = nullptr;
  const char* processes_symbol = "";
  size_t process_stride = sizeof(nvmlProcessInfo_v2_t);

  std::string Error(nvmlReturn_t rc) const {
    const char* text = error_string ? error_string(rc) : nullptr;
    return text ? std::string(text) : "NVML error " + std::to_string(rc);
  }
};

namespace {

template <typename Fn>
bool Resolve(void* handle, const char* symbol, Fn& out) {
  void* p = ::dlsym(handle, symbol);
  if (!p) return false;
  out = reinterpret_cast<Fn>(p);
  return true;
}

// The compute processes on one device: the two-call pattern, retried while the list grows.
Result<std::vector<GpuProcess>> NvmlProcesses(const NvmlSession::Api& api, nvmlDevice_t device,
                                              nvmlReturn_t& rc_out) {
  std::vector<GpuProcess> processes;
  unsigned int count = 0;
  nvmlReturn_t rc = api.get_processes(device, &count, nullptr);
  for (int attempt = 0; rc == NVML_ERROR_INSUFFICIENT_SIZE && attempt < 5; ++attempt) {
    // Slack: processes can start between the two calls.
    unsigned int capacity = count * 2 + 8;
    std::vector<unsigned char> buffer(static_cast<size_t>(capacity) * kLongProcessEntry, 0);
    count = capacity;
    rc = api.get_processes(device, &count, buffer.data());
    if (rc != NVML_SUCCESS) continue;
    for (unsigned int i = 0; i < count && i < capacity; ++i) {
      nvmlProcessInfo_v2_t entry;
      std::memcpy(&entry, buffer.data() + static_cast<size_t>(i) * api.process_stride,
                  sizeof entry);
      GpuProcess p;
      p.pid = static_cast<pid_t>(entry.pid);
      if (entry.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE)
        p.used_memory_bytes = entry.usedGpuMemory;
      processes.push_back(std::move(p));
    }
    rc_out = NVML_SUCCESS;
    return processes;
  }
  rc_out = rc;
  if (rc == NVML_SUCCESS) return processes;  // none
  if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
    return Status::Error(std::string(api.processes_symbol) + ": the process list kept growing");
  }
  return Status::Error(std::string(api.processes_symbol) + ": " + api.Error(rc));
}

}  // namespace

std::string_view GpuSourceName(GpuSource source) {
  return source == GpuSource::kNvml ? "nvml" : "nvidia-smi";
}

const GpuInfo* GpuSnapshot::FindIndex(int index) const {
  for (const GpuInfo& gpu : gpus) {
    if (gpu.index == index) return &gpu;
  }
  return nullptr;
}

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

Result<std::unique_ptr<NvmlSession>> NvmlSession::Open(const std::string& library) {
  // RTLD_LOCAL: nothing else in deployd should bind to the driver's symbols.
  void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    std::string text = why ? why : "";
    if (text.find("No such file") != std::string::npos || text.empty()) {
      return Status::Error("no NVIDIA driver: " + library + " not found");
    }
    return Status::Error("cannot load " + library + ": " + text);
  }
  auto api = std::make_unique<Api>();
  // The versioned names: nvml.h #defines the plain names to these, and the plain symbols that
  // the library still exports keep older, incompatible ABIs.
  const char* missing = nullptr;
  if (!Resolve(handle, "nvmlInit_v2", api->init)) missing = "nvmlInit_v2";
  if (!Resolve(handle, "nvmlShutdown", api->shutdown)) missing = "nvmlShutdown";
  if (!Resolve(handle, "nvmlErrorString", api->error_string)) missing = "nvmlErrorString";
  if (!Resolve(handle, "nvmlDeviceGetCount_v2", api->get_count)) missing = "nvmlDeviceGetCount_v2";
  if (!Resolve(handle, "nvmlDeviceGetHandleByIndex_v2", api->get_handle)) {
    missing = "nvmlDeviceGetHandleByIndex_v2";
  }
  if (!Resolve(handle, "nvmlDeviceGetUUID", api->get_uuid)) missing = "nvmlDeviceGetUUID";
  if (!Resolve(handle, "nvmlDeviceGetName", api->get_name)) missing = "nvmlDeviceGetName";
  if (!Resolve(handle, "nvmlDeviceGetMemoryInfo", api->get_memory)) {
    missing = "nvmlDeviceGetMemoryInfo";
  }
  if (Resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v3", api->get_processes)) {
    api->processes_symbol = "nvmlDeviceGetComputeRunningProcesses_v3";
    // The drivers whose _v3 wrote the 32-byte entry are those with confidential-computing
    // memory queries but not yet the process-detail list that replaced the field (the rule
    // nvitop uses). Everywhere else _v3 writes the 24-byte entry.
    if (::dlsym(handle, "nvmlDeviceGetConfComputeMemSizeInfo") &&
        !::dlsym(handle, "nvmlDeviceGetRunningProcessDetailList")) {
      api->process_stride = kLongProcessEntry;
    }
  } else if (Resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v2", api->get_processes)) {
    api->processes_symbol = "nvmlDeviceGetComputeRunningProcesses_v2";  // same 24-byte entry
  } else {
    missing = "nvmlDeviceGetComputeRunningProcesses_v3";
  }
  if (missing) {
    ::dlclose(handle);
    return Status::Error(library + " lacks " + missing + " (driver too old?)");
  }
  nvmlReturn_t rc = api->init();
  if (rc != NVML_SUCCESS) {
    std::string message = "NVML init failed: " + api->Error(rc);
    if (rc == NVML_ERROR_LIB_RM_VERSION_MISMATCH) {
      message +=
          " (the driver package was upgraded without a reboot: the loaded kernel module, "
          "/proc/driver/nvidia/version, no longer matches the library)";
    } else if (rc == NVML_ERROR_DRIVER_NOT_LOADED) {
      message += " (the NVIDIA kernel module is not loaded)";
    } else if (rc == NVML_ERROR_NO_PERMISSION) {
      message += " (no access to /dev/nvidia*)";
    }
    ::dlclose(handle);
    return Status::Error(message);
  }
  std::unique_ptr<NvmlSession> session(new NvmlSession());
  session->handle_ = handle;
  session->api_ = std::move(api);
  return session;
}

NvmlSession::~NvmlSession() {
  if (api_ && api_->shutdown) api_->shutdown();
  if (handle_) ::dlclose(handle_);
}

Result<GpuSnapshot> NvmlSession::Read() {
  const Api& api = *api_;
  GpuSnapshot snapshot;
  snapshot.source = GpuSource::kNvml;
  unsigned int count = 0;
  nvmlReturn_t rc = api.get_count(&count);
  if (rc != NVML_SUCCESS) return Status::Error("nvmlDeviceGetCount_v2: " + api.Error(rc));
  for (unsigned int i = 0; i < count; ++i) {
    std::string where = "GPU " + std::to_string(i) + ": ";
    nvmlDevice_t device = nullptr;
    rc = api.get_handle(i, &device);
    if (rc != NVML_SUCCESS) {
      return Status::Error(where + "nvmlDeviceGetHandleByIndex_v2: " + api.Error(rc));
    }
    GpuInfo gpu;
    gpu.index = static_cast<int>(i);
    char text[kNvmlStringBufferSize] = {};
    rc = api.get_uuid(device, text, sizeof text);
    if (rc != NVML_SUCCESS) return Status::Error(where + "nvmlDeviceGetUUID: " + api.Error(rc));
    gpu.uuid = std::string(text, strnlen(text, sizeof text));
    std::memset(text, 0, sizeof text);
    if (api.get_name(device, text, sizeof text) == NVML_SUCCESS) {
      gpu.name = std::string(text, strnlen(text, sizeof text));
    }
    nvmlMemory_t memory{};
    rc = api.get_memory(device, &memory);
    if (rc == NVML_SUCCESS) {
      gpu.memory_used_bytes = memory.used;
      gpu.memory_total_bytes = memory.total;
    } else if (rc != NVML_ERROR_NOT_SUPPORTED && rc != NVML_ERROR_NO_PERMISSION) {
      return Status::Error(where + "nvmlDeviceGetMemoryInfo: " + api.Error(rc));
    }
    auto processes = NvmlProcesses(api, device, rc);
    if (processes.ok()) {
      gpu.processes = std::move(processes.value());
    } else if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_NO_PERMISSION) {
      gpu.processes_unknown = processes.status().message();
    } else {
      return Status::Error(where + processes.status().message());
    }
    for (GpuProcess& p : gpu.processes) {
      // NVML gives pids only; the title comes from /proc (empty for a pid in another pid
      // namespace: the driver reports host pids).
      if (auto info = ReadProcess(p.pid)) p.name = info->Title();
    }
    snapshot.gpus.push_back(std::move(gpu));
  }
  return snapshot;
}

Result<GpuSnapshot> ReadNvml(const std::string& library) {
  auto session = NvmlSession::Open(library);
  if (!session.ok()) return session.status();
  return session.value()->Read();
}

Result<GpuSnapshot> ReadNvidiaSmi(const CommandRunner& run) {
  auto gpus = run(NvidiaSmiGpuQuery());
  if (!gpus.ok()) return gpus.status();
  auto apps = run(NvidiaSmiAppsQuery());
  if (!apps.ok()) return apps.status();
  return ParseNvidiaSmi(gpus.value(), apps.value());
}

std::string NvmlOffReason() {
  const char* value = std::getenv("DEPLOYD_NVML");
  if (value && std::string_view(value) == "off") return "NVML turned off (DEPLOYD_NVML=off)";
  return "";
}

Result<GpuSnapshot> ReadGpuState(const CommandRunner& run_nvidia_smi,
                                 const std::string& nvml_library) {
  std::string off = NvmlOffReason();
  Result<GpuSnapshot> nvml = Status::Error(off);
  if (off.empty()) nvml = ReadNvml(nvml_library);
  if (nvml.ok()) return nvml;
  auto smi = ReadNvidiaSmi(run_nvidia_smi);
  if (smi.ok()) return smi;
  return GpuStateError(nvml.status().message(), smi.status().message());
}

Status GpuStateError(const std::string& nvml_error, const std::string& nvidia_smi_error) {
  bool named = nvidia_smi_error.rfind("nvidia-smi", 0) == 0;
  return Status::Error("cannot read GPU state: " + nvml_error + "; " +
                       (named ? "" : "nvidia-smi: ") + nvidia_smi_error);
}

CommandRunner BlockingCommandRunner(Duration timeout) {
  return [timeout](const std::vector<std::string>& argv) -> Result<std::string> {
    if (argv.empty()) return Status::Error("empty command");
    Result<CommandOutput> run = RunBlocking(argv, timeout);
    if (!run.ok()) return run.status();
    if (!run->ok()) {
      // nvidia-smi says why on stdout ("NVIDIA-SMI has failed because …").
      std::string first_line = run->out.substr(0, run->out.find('\n'));
      return Status::Error(argv[0] + ": " + run->How() +
                           (first_line.empty() ? "" : ": " + std::string(Trim(first_line))));
    }
    return std::move(run->out);
  };
}

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
