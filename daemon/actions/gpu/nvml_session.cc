#include "actions/gpu/nvml_session.h"

#include <dlfcn.h>

#include <cstring>
#include <vector>

#include "process/process_table.h"

namespace deployd {
namespace {

// NVML, declared here (no NVIDIA headers are needed to build deployd). Values from nvml.h.

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

}  // namespace deployd
