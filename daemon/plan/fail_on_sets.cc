#include "plan/fail_on_sets.h"

#include <array>
#include <string>
#include <utility>

#include "util/pattern.h"

namespace deployd {
namespace {

// Ordered so that the most specific explanation wins when several patterns match one line.
constexpr std::array<NamedPattern, 16> kVllm = {{
    {R"(Free memory on device .* is less than desired GPU memory utilization)",
     "another process holds GPU memory: stop it (kill, gpus_free) or lower "
     "--gpu-memory-utilization"},
    {R"(OutOfMemoryError: CUDA out of memory|CUDA out of memory)",
     "CUDA out of memory: a foreign process holds GPU memory, or the configuration does not fit "
     "(--max-model-len, --gpu-memory-utilization, tensor parallel size)"},
    {R"(KV cache is needed, which is larger than the available KV cache memory|larger than the maximum number of tokens that can be stored in KV cache)",
     "the KV cache is too small for --max-model-len: lower it (the log gives an estimate) or "
     "raise --gpu-memory-utilization"},
    {R"(The quantization method \S+ is not supported for the current GPU)",
     "this checkpoint's quantization needs a newer GPU generation"},
    {R"(type fp8e4nv not supported in this architecture)",
     "an fp8 KV cache is not supported on this GPU: drop --kv-cache-dtype fp8"},
    {R"(does not match the quantization method specified in the .quantization. argument)",
     "--quantization contradicts the model's config: remove or fix it"},
    {R"(Currently supported kv cache quantization is)",
     "the checkpoint's KV-cache quantization scheme is not supported by this vLLM"},
    {R"(Model architectures \[.*\] (are not supported for now|failed to be inspected))",
     "this vLLM does not know the model's architecture: upgrade vLLM or install its extras"},
    {R"(NCCL error|ncclUnhandledCudaError|peer access is not supported|DistBackendError)",
     "NCCL/P2P failure between GPUs: check topology and driver, try NCCL_P2P_DISABLE=1"},
    {R"(SafetensorError: Error while deserializing header)",
     "a safetensors shard is truncated or corrupt: download it again (weights_complete)"},
    {R"(\[Errno 98\] Address already in use|address already in use)",
     "the port is in use: an old server or another process listens on it"},
    {R"(driver on your system is too old|libcudart\.so\.\d+: cannot open|_C\.abi3\.so: undefined symbol|Driver/library version mismatch)",
     "the CUDA runtime and the driver do not match: the upgrade pulled a build this driver "
     "cannot run, or the driver was upgraded without a reboot"},
    {R"(invalid literal for int\(\) with base 10: 'MIG-)",
     "vLLM does not accept MIG device UUIDs in CUDA_VISIBLE_DEVICES"},
    {R"(Timed out waiting for engine)", "the engine did not start in time (see the lines before)"},
    {R"(Engine core initialization failed|EngineCore encountered a fatal error|EngineDeadError|Worker proc \S+ died unexpectedly)",
     "the engine died: the root cause is in the lines before (`deployctl logs`)"},
    // The kernel's lines (the NVIDIA driver's), never in the server's output or its unit's
    // journal: matched against the kernel's log too.
    {R"(NVRM: Xid|fallen off the bus)",
     "a GPU hardware fault (Xid): the GPU may need a reset or the host a reboot",
     /*retryable=*/false, /*kernel=*/true},
}};

constexpr std::array<NamedPattern, 3> kHf = {{
    {R"((?i)GatedRepoError|Cannot access gated repo|RepositoryNotFoundError|\b40[13] Client Error)",
     "the repository is gated, private or misspelt: accept its terms and give the step an "
     "HF_TOKEN (secrets:)"},
    {R"((?i)Errno 28|No space left on device|not enough free disk space)",
     "the disk is full: free space or download to a larger disk"},
    {R"(416 Client Error: Range Not Satisfiable)",
     "a stale .incomplete file cannot be resumed: remove that file's .incomplete under "
     "TO/.cache/huggingface/download and retry",
     /*retryable=*/true},
}};

}  // namespace

std::span<const NamedPattern> FailOnSet(std::string_view name) {
  if (name == "vllm") return kVllm;
  if (name == "hf") return kHf;
  return {};
}

namespace {

std::int64_t Instructions(std::span<const NamedPattern> set) {
  std::int64_t sum = 0;
  for (const NamedPattern& p : set) sum += CheckPattern(p.pattern).instructions;
  return sum;
}

}  // namespace

std::int64_t FailOnSetInstructions(std::string_view name) {
  static const std::int64_t kVllmInstructions = Instructions(kVllm);
  static const std::int64_t kHfInstructions = Instructions(kHf);
  if (name == "vllm") return kVllmInstructions;
  if (name == "hf") return kHfInstructions;
  return 0;
}

void AddFailOnSet(std::string_view name, SourcePos pos, Watch& watch) {
  for (const NamedPattern& p : FailOnSet(name)) {
    FailPattern pattern;
    pattern.pattern = std::string(p.pattern);
    pattern.pos = pos;
    pattern.explanation = std::string(p.explanation);
    pattern.fatal = !p.retryable;
    pattern.set = std::string(name);
    pattern.kernel = p.kernel;
    watch.fail_on.push_back(std::move(pattern));
  }
}

}  // namespace deployd
