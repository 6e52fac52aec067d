// The GPU state for `gpus_free` (gpu_snapshot.h), read from whichever source answers: NVML
// (nvml_session.h) first, nvidia-smi (nvidia_smi.h) when NVML cannot be loaded, initialized or
// read, or is turned off.
//
// Blocking: ReadGpuState makes synchronous driver calls and runs nvidia-smi through the
// CommandRunner the caller gives it (BlockingCommandRunner in the `deployd --action` and
// `--probe` children); never for the daemon's io_context thread.
#ifndef DEPLOYD_ACTIONS_GPU_GPU_STATE_H_
#define DEPLOYD_ACTIONS_GPU_GPU_STATE_H_

#include <string>

#include "actions/gpu/gpu_snapshot.h"
#include "actions/gpu/nvidia_smi.h"
#include "actions/gpu/nvml_session.h"
#include "deployd/status.h"

namespace deployd {

// DEPLOYD_NVML=off in the environment turns NVML off: the GPU state comes from nvidia-smi only.
// For hosts where the driver must not answer: a CI runner with a GPU whose tests drive the
// nvidia-smi stand-in. NvmlOffReason() is then the reason given for NVML ("" when it is on).
std::string NvmlOffReason();

// The policy: NVML first (unless turned off, see NvmlOffReason); when it cannot be loaded,
// initialized or read, nvidia-smi through `run_nvidia_smi`. When both fail the error gives both
// reasons:
//   "cannot read GPU state: no NVIDIA driver: libnvidia-ml.so.1 not found; nvidia-smi: cannot
//   start 'nvidia-smi': No such file or directory"
Result<GpuSnapshot> ReadGpuState(const CommandRunner& run_nvidia_smi,
                                 const std::string& nvml_library = kNvmlLibrary);

// The error when neither source answers, as ReadGpuState gives it (for callers that keep an
// NvmlSession open and so compose the two themselves). nvidia-smi's own failures already start
// with "nvidia-smi" ("nvidia-smi: exit status 9: NVIDIA-SMI has failed …") and are not prefixed
// again.
Status GpuStateError(const std::string& nvml_error, const std::string& nvidia_smi_error);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_GPU_GPU_STATE_H_
