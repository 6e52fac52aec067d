// GpuSnapshot: the GPU state at one instant for `gpus_free` — which compute processes hold each
// GPU and how much memory is used — whichever source it was read from (nvml_session.h or
// nvidia_smi.h; gpu_state.h chooses).
//
// Unknown is never zero: a memory figure nvidia-smi prints as `[N/A]` or `[Not Supported]`
// (MIG, WDDM, missing permissions), or NVML reports as NVML_VALUE_NOT_AVAILABLE, is held as an
// empty optional, and a GPU whose used memory or process list is unknown is not free. Plain
// values; no threading concerns.
#ifndef DEPLOYD_ACTIONS_GPU_GPU_SNAPSHOT_H_
#define DEPLOYD_ACTIONS_GPU_GPU_SNAPSHOT_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deployd {

enum class GpuSource { kNvml, kNvidiaSmi };
// "nvml" / "nvidia-smi"
std::string_view GpuSourceName(GpuSource source);

struct GpuProcess {
  pid_t pid = 0;  // a host pid: inside a container it may not exist in this pid namespace
  std::optional<std::uint64_t> used_memory_bytes;  // unknown: [N/A], [Not Supported], …
  // nvidia-smi's process_name; with NVML the title from /proc ("VLLM::Worker_TP0"), or "" when
  // the pid is not visible here.
  std::string name;
};

struct GpuInfo {
  int index = 0;     // nvidia-smi's and NVML's index: PCI bus order, not CUDA's default order
  std::string uuid;  // "GPU-5e6f…"; stable across reboots, unlike the index
  std::string name;  // "NVIDIA H200"
  std::optional<std::uint64_t> memory_used_bytes;  // includes what the driver reserves
  std::optional<std::uint64_t> memory_total_bytes;
  std::vector<GpuProcess> processes;  // compute processes
  // Why the process list could not be read ("no permission": NVML on a MIG parent without
  // privileges), or "" when it was read. A GPU with an unknown process list is not free.
  std::string processes_unknown;
};

struct GpuSnapshot {
  std::vector<GpuInfo> gpus;  // sorted by index
  // Compute processes on a GPU UUID that the GPU query did not list (a MIG instance's UUID, or
  // a GPU that appeared between the two nvidia-smi queries): the GPU they hold is unknown.
  std::vector<std::pair<std::string, GpuProcess>> unplaced_processes;
  GpuSource source = GpuSource::kNvidiaSmi;

  const GpuInfo* FindIndex(int index) const;
};

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_GPU_GPU_SNAPSHOT_H_
