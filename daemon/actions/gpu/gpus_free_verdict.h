// The verdict of `gpus_free` on one GPU snapshot (gpu_snapshot.h): is each GPU asked for free,
// and if not, what holds it — as a summary line and evidence for the step and the check. Pure.
#ifndef DEPLOYD_ACTIONS_GPU_GPUS_FREE_VERDICT_H_
#define DEPLOYD_ACTIONS_GPU_GPUS_FREE_VERDICT_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "actions/gpu/gpu_snapshot.h"

namespace deployd {

// One GPU's answer to "is it free?".
struct GpuFreeVerdict {
  int index = 0;
  bool present = false;  // false: the snapshot has no GPU with this index
  bool free = false;
  std::string uuid;
  std::optional<std::uint64_t> memory_used_bytes;
  std::vector<GpuProcess> processes;  // what holds it
  // Why it is not free, one phrase each: "pid 4242 (VLLM::Worker_TP1) holds 70GiB",
  // "memory used 71GiB, max 1GiB", "memory used unknown", "no such GPU (GPUs: 0-7)".
  std::vector<std::string> reasons;
};

struct GpusFreeResult {
  bool all_free = false;
  std::vector<GpuFreeVerdict> gpus;  // in the order asked
  // "gpus_free 0,1: free (no compute process; memory used at most 512MiB, max 1GiB; nvml)" or
  // "gpus_free 0,1: GPU 1: pid 4242 (VLLM::Worker_TP1) holds 70GiB; memory used 71GiB, max 1GiB"
  std::string summary;
  // {"check": "gpus_free", "source", "max_used_bytes", "gpus": [{"index", "uuid", "name",
  // "free", "memory_used_bytes" (null: unknown), "memory_total_bytes", "processes": [{"pid",
  // "name", "used_memory_bytes"}], "reasons"}]}
  boost::json::object evidence;
};

// A GPU is free when it is present, its process list is known and empty, no process sits on an
// unplaced GPU UUID, and its used memory is known and at most `max_used_bytes` (the driver
// reserves a few hundred MiB on an idle GPU, so 0 is never a useful maximum). `gpu_indices`
// empty: every GPU in the snapshot.
//
// One snapshot answers for one instant. "Stable for" (free on every read for a duration, since
// memory is released some time after the last process exits) is the caller's: read again on a
// timer and restart the clock whenever a read is not all free.
GpusFreeResult EvaluateGpusFree(const GpuSnapshot& snapshot, const std::vector<int>& gpu_indices,
                                std::uint64_t max_used_bytes);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_GPU_GPUS_FREE_VERDICT_H_
