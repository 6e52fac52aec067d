// nvidia-smi as a source of the GPU state (gpu_snapshot.h): the two CSV queries, their parser,
// and both run through a CommandRunner (process/blocking_command.h) — the seam tests give
// canned output through. ParseNvidiaSmi is pure; ReadNvidiaSmi blocks as long as `run` does.
#ifndef DEPLOYD_ACTIONS_GPU_NVIDIA_SMI_H_
#define DEPLOYD_ACTIONS_GPU_NVIDIA_SMI_H_

#include <string>
#include <string_view>
#include <vector>

#include "actions/gpu/gpu_snapshot.h"
#include "deployd/status.h"
#include "process/blocking_command.h"

namespace deployd {

// The nvidia-smi invocations ParseNvidiaSmi reads, as argv (nvidia-smi looked up on PATH).
std::vector<std::string> NvidiaSmiGpuQuery();   // --query-gpu=index,uuid,name,memory.used,…
std::vector<std::string> NvidiaSmiAppsQuery();  // --query-compute-apps=gpu_uuid,pid,…

// Parses the stdout of NvidiaSmiGpuQuery() and NvidiaSmiAppsQuery() (`csv,noheader,nounits`;
// values in MiB). Processes are joined to GPUs by UUID. Blank lines, a header line and "No
// running processes found" are tolerated; any other malformed row is an error that names the
// query and the 1-based line and quotes it:
//   nvidia-smi --query-gpu line 2: expected 5 fields (index, uuid, name, memory.used,
//   memory.total), got 3: "1, GPU-b, H200"
Result<GpuSnapshot> ParseNvidiaSmi(std::string_view gpu_csv, std::string_view apps_csv);

// Both nvidia-smi queries through `run`, then ParseNvidiaSmi.
Result<GpuSnapshot> ReadNvidiaSmi(const CommandRunner& run);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_GPU_NVIDIA_SMI_H_
