// NVML as a source of the GPU state (gpu_snapshot.h): libnvidia-ml.so.1 loaded with dlopen, so
// deployd never links to the driver and builds without NVIDIA's headers.
//
// The NVML calls are synchronous driver calls; nvmlInit_v2 can take seconds on a host without
// persistence mode (the driver initializes the GPUs), so a caller that polls should keep one
// NvmlSession open rather than call ReadNvml each time.
#ifndef DEPLOYD_ACTIONS_GPU_NVML_SESSION_H_
#define DEPLOYD_ACTIONS_GPU_NVML_SESSION_H_

#include <memory>
#include <string>

#include "actions/gpu/gpu_snapshot.h"
#include "deployd/status.h"

namespace deployd {

inline constexpr char kNvmlLibrary[] = "libnvidia-ml.so.1";

// An initialized NVML, kept open across reads (init is the slow part). Not thread-safe; use
// from one thread. Destruction calls nvmlShutdown and unloads the library.
class NvmlSession {
 public:
  // Errors: "no NVIDIA driver: libnvidia-ml.so.1 not found", "cannot load …: <dlerror>",
  // "libnvidia-ml.so.1 lacks nvmlInit_v2 (driver too old?)", "NVML init failed: Driver/library
  // version mismatch (…)". `library` is a soname or a path (tests load a stand-in).
  static Result<std::unique_ptr<NvmlSession>> Open(const std::string& library = kNvmlLibrary);
  ~NvmlSession();
  NvmlSession(const NvmlSession&) = delete;
  NvmlSession& operator=(const NvmlSession&) = delete;

  // Every GPU with its memory and compute processes. Errors name the GPU and the call:
  // "GPU 3: nvmlDeviceGetMemoryInfo: GPU is lost".
  Result<GpuSnapshot> Read();

  struct Api;  // the resolved symbols; defined in nvml_session.cc only

 private:
  NvmlSession() = default;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
};

// Open, Read, close.
Result<GpuSnapshot> ReadNvml(const std::string& library = kNvmlLibrary);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_GPU_NVML_SESSION_H_
