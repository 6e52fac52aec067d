#include "actions/gpu/gpu_state.h"

#include <cstdlib>
#include <string_view>

namespace deployd {

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

}  // namespace deployd
