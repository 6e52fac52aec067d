#include "actions/gpu/gpu_snapshot.h"

namespace deployd {

std::string_view GpuSourceName(GpuSource source) {
  return source == GpuSource::kNvml ? "nvml" : "nvidia-smi";
}

const GpuInfo* GpuSnapshot::FindIndex(int index) const {
  for (const GpuInfo& gpu : gpus) {
    if (gpu.index == index) return &gpu;
  }
  return nullptr;
}

}  // namespace deployd
