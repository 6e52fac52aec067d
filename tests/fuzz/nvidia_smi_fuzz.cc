// nvidia-smi's CSV as `gpus_free` reads it (actions/gpu/nvidia_smi.h): the input is the GPU
// query's output, a NUL byte, then the process query's. A snapshot that parses is judged as
// `gpus_free` judges it, for every GPU and for GPUs 0 and 1.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "actions/gpu/gpus_free_verdict.h"
#include "actions/gpu/nvidia_smi.h"

using namespace deployd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  size_t nul = text.find('\0');
  std::string_view gpus = text.substr(0, nul);
  std::string_view apps = nul == std::string_view::npos ? "" : text.substr(nul + 1);
  Result<GpuSnapshot> snapshot = ParseNvidiaSmi(gpus, apps);
  if (!snapshot.ok()) return 0;
  (void)EvaluateGpusFree(snapshot.value(), {}, 1ull << 30);
  (void)EvaluateGpusFree(snapshot.value(), {0, 1}, 0);
  return 0;
}
