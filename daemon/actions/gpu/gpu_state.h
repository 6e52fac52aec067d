// GPU state for `gpus_free`: which compute processes hold each GPU and how much memory is used,
// read from NVML (libnvidia-ml.so.1, loaded with dlopen: deployd never links to the driver) or,
// when NVML cannot be used, parsed from nvidia-smi's CSV output.
//
// Unknown is never zero: a memory figure nvidia-smi prints as `[N/A]` or `[Not Supported]`
// (MIG, WDDM, missing permissions), or NVML reports as NVML_VALUE_NOT_AVAILABLE, is held as an
// empty optional, and a GPU whose used memory or process list is unknown is not free.
//
// Threading and blocking: ParseNvidiaSmi and EvaluateGpusFree are pure. The NVML calls are
// synchronous driver calls; nvmlInit_v2 can take seconds on a host without persistence mode
// (the driver initializes the GPUs), so a caller that polls should keep one NvmlSession open
// rather than call ReadNvml each time. ReadGpuState runs nvidia-smi through the CommandRunner the
// caller gives it, so the engine can run the two queries as asynchronous children and call
// ParseNvidiaSmi itself; BlockingCommandRunner is for tools and GPU-machine checks only.
#ifndef DEPLOYD_ACTIONS_GPU_GPU_STATE_H_
#define DEPLOYD_ACTIONS_GPU_GPU_STATE_H_

#include <sys/types.h>

#include <boost/json/object.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deployd/plan.h"
#include "deployd/status.h"

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

  struct Api;  // the resolved symbols; defined in gpu_state.cc only

 private:
  NvmlSession() = default;
  void* handle_ = nullptr;
  std::unique_ptr<Api> api_;
};

// Open, Read, close.
Result<GpuSnapshot> ReadNvml(const std::string& library = kNvmlLibrary);

// Runs a command and returns its stdout, or why it could not run or failed (a non-zero exit is
// an error whose message includes the first line of output: nvidia-smi prints its own errors,
// like "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver", there).
using CommandRunner = std::function<Result<std::string>(const std::vector<std::string>& argv)>;

// Both nvidia-smi queries through `run`, then ParseNvidiaSmi.
Result<GpuSnapshot> ReadNvidiaSmi(const CommandRunner& run);

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

// Runs the command synchronously (posix_spawnp, stdout captured, stderr discarded), killing it
// after `timeout`: nvidia-smi hangs on a GPU that fell off the bus. Blocks the calling thread,
// so it is for tools and GPU-machine checks, never for the daemon's io_context thread.
CommandRunner BlockingCommandRunner(Duration timeout = std::chrono::seconds(30));

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

#endif  // DEPLOYD_ACTIONS_GPU_GPU_STATE_H_
