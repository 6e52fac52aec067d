#include "actions/gpu/gpu_state.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <boost/json/serialize.hpp>
#include <catch2/catch.hpp>
#include <fstream>

#include "actions/gpu/gpus_free_verdict.h"
#include "process/blocking_command.h"

using namespace deployd;

namespace {

constexpr std::uint64_t kMiB = 1024 * 1024;
constexpr std::uint64_t kGiB = 1024 * kMiB;

// Recorded shapes of `nvidia-smi --query-gpu=index,uuid,name,memory.used,memory.total
// --format=csv,noheader,nounits` and `--query-compute-apps=gpu_uuid,pid,process_name,
// used_memory`: comma and space separated, MiB without units.
constexpr char kOneIdleGpu[] =
    "0, GPU-3f9a2c1e-7b4d-4e8a-9c2b-1d5e6f7a8b9c, NVIDIA H200, 1, 143771\n";

constexpr char kEightGpus[] =
    "0, GPU-00000000-1111-2222-3333-000000000000, NVIDIA H100 80GB HBM3, 72411, 81559\n"
    "1, GPU-00000000-1111-2222-3333-000000000001, NVIDIA H100 80GB HBM3, 72411, 81559\n"
    "2, GPU-00000000-1111-2222-3333-000000000002, NVIDIA H100 80GB HBM3, 72409, 81559\n"
    "3, GPU-00000000-1111-2222-3333-000000000003, NVIDIA H100 80GB HBM3, 72409, 81559\n"
    "4, GPU-00000000-1111-2222-3333-000000000004, NVIDIA H100 80GB HBM3, 4, 81559\n"
    "5, GPU-00000000-1111-2222-3333-000000000005, NVIDIA H100 80GB HBM3, 20480, 81559\n"
    "6, GPU-00000000-1111-2222-3333-000000000006, NVIDIA H100 80GB HBM3, 4, 81559\n"
    "7, GPU-00000000-1111-2222-3333-000000000007, NVIDIA H100 80GB HBM3, 4, 81559\n";

// vLLM with tensor parallel 4 on GPUs 0-3 (the engine on GPU 0 as well), a notebook on GPU 5.
constexpr char kEightGpusApps[] =
    "GPU-00000000-1111-2222-3333-000000000000, 80613, VLLM::EngineCore, 512\n"
    "GPU-00000000-1111-2222-3333-000000000000, 80701, VLLM::Worker_TP0, 71888\n"
    "GPU-00000000-1111-2222-3333-000000000001, 80702, VLLM::Worker_TP1, 71888\n"
    "GPU-00000000-1111-2222-3333-000000000002, 80703, VLLM::Worker_TP2, 71886\n"
    "GPU-00000000-1111-2222-3333-000000000003, 80704, VLLM::Worker_TP3, 71886\n"
    "GPU-00000000-1111-2222-3333-000000000005, 91234, /usr/bin/python3, 20474\n";

std::string TempDir() {
  char pattern[] = "/tmp/deployd-gpu-test-XXXXXX";
  char* dir = ::mkdtemp(pattern);
  REQUIRE(dir != nullptr);
  return dir;
}

// A stand-in for nvidia-smi: answers each query with canned output.
CommandRunner CannedNvidiaSmi(std::string gpus, std::string apps) {
  return [gpus, apps](const std::vector<std::string>& argv) -> Result<std::string> {
    REQUIRE(argv.size() == 3);
    CHECK(argv[0] == "nvidia-smi");
    CHECK(argv[2] == "--format=csv,noheader,nounits");
    if (argv[1].rfind("--query-gpu=", 0) == 0) return gpus;
    if (argv[1].rfind("--query-compute-apps=", 0) == 0) return apps;
    FAIL("unexpected query " << argv[1]);
    return Status::Error("unexpected");
  };
}

}  // namespace

TEST_CASE("nvidia-smi: one idle GPU") {
  auto snapshot = ParseNvidiaSmi(kOneIdleGpu, "");
  REQUIRE(snapshot.ok());
  CHECK(snapshot->source == GpuSource::kNvidiaSmi);
  REQUIRE(snapshot->gpus.size() == 1);
  const GpuInfo& gpu = snapshot->gpus[0];
  CHECK(gpu.index == 0);
  CHECK(gpu.uuid == "GPU-3f9a2c1e-7b4d-4e8a-9c2b-1d5e6f7a8b9c");
  CHECK(gpu.name == "NVIDIA H200");
  CHECK(gpu.memory_used_bytes == 1 * kMiB);
  CHECK(gpu.memory_total_bytes == 143771 * kMiB);
  CHECK(gpu.processes.empty());

  auto result = EvaluateGpusFree(*snapshot, {0}, 1 * kGiB);
  CHECK(result.all_free);
  CHECK(result.summary ==
        "gpus_free 0: free (no compute process; memory used at most 1MiB, max 1GiB; nvidia-smi)");
  CHECK(boost::json::serialize(result.evidence) ==
        R"({"check":"gpus_free","source":"nvidia-smi","max_used_bytes":1073741824,"gpus":[)"
        R"({"index":0,"uuid":"GPU-3f9a2c1e-7b4d-4e8a-9c2b-1d5e6f7a8b9c","name":"NVIDIA H200",)"
        R"("memory_used_bytes":1048576,"memory_total_bytes":150754820096,"processes":[],)"
        R"("free":true,"reasons":[]}]})");
}

TEST_CASE("nvidia-smi: 8 GPUs, processes joined by UUID") {
  auto snapshot = ParseNvidiaSmi(kEightGpus, kEightGpusApps);
  REQUIRE(snapshot.ok());
  REQUIRE(snapshot->gpus.size() == 8);
  CHECK(snapshot->unplaced_processes.empty());
  REQUIRE(snapshot->gpus[0].processes.size() == 2);
  CHECK(snapshot->gpus[0].processes[1].pid == 80701);
  CHECK(snapshot->gpus[0].processes[1].name == "VLLM::Worker_TP0");
  CHECK(snapshot->gpus[0].processes[1].used_memory_bytes == 71888 * kMiB);
  CHECK(snapshot->gpus[3].processes.size() == 1);
  CHECK(snapshot->gpus[4].processes.empty());
  REQUIRE(snapshot->gpus[5].processes.size() == 1);
  CHECK(snapshot->gpus[5].processes[0].name == "/usr/bin/python3");

  SECTION("the serving GPUs are held, and the summary says by whom") {
    auto result = EvaluateGpusFree(*snapshot, {0, 1, 2, 3}, 1 * kGiB);
    CHECK_FALSE(result.all_free);
    REQUIRE(result.gpus.size() == 4);
    CHECK(result.gpus[0].processes.size() == 2);
    CHECK(result.summary ==
          "gpus_free 0,1,2,3: "
          "GPU 0: pid 80613 (VLLM::EngineCore) holds 512MiB, pid 80701 (VLLM::Worker_TP0) holds "
          "70.2GiB, memory used 70.7GiB, max 1GiB; "
          "GPU 1: pid 80702 (VLLM::Worker_TP1) holds 70.2GiB, memory used 70.7GiB, max 1GiB; "
          "GPU 2: pid 80703 (VLLM::Worker_TP2) holds 70.2GiB, memory used 70.7GiB, max 1GiB; "
          "GPU 3: pid 80704 (VLLM::Worker_TP3) holds 70.2GiB, memory used 70.7GiB, max 1GiB");
  }
  SECTION("the idle GPUs are free") {
    auto result = EvaluateGpusFree(*snapshot, {4, 6, 7}, 1 * kGiB);
    CHECK(result.all_free);
    CHECK(result.summary ==
          "gpus_free 4,6,7: free (no compute process; memory used at most 4MiB, max 1GiB; "
          "nvidia-smi)");
  }
  SECTION("one busy GPU among free ones is named alone") {
    auto result = EvaluateGpusFree(*snapshot, {4, 5}, 1 * kGiB);
    CHECK_FALSE(result.all_free);
    CHECK(result.gpus[0].free);
    CHECK_FALSE(result.gpus[1].free);
    CHECK(result.summary ==
          "gpus_free 4,5: GPU 5: pid 91234 (/usr/bin/python3) holds 19.9GiB, memory used 20GiB, "
          "max 1GiB");
  }
  SECTION("memory alone can hold a GPU: no process listed, but memory used over the max") {
    auto result = EvaluateGpusFree(*snapshot, {4}, 2 * kMiB);
    CHECK_FALSE(result.all_free);
    CHECK(result.gpus[0].reasons == std::vector<std::string>{"memory used 4MiB, max 2MiB"});
  }
  SECTION("no list: every GPU") {
    auto result = EvaluateGpusFree(*snapshot, {}, 1 * kGiB);
    CHECK(result.gpus.size() == 8);
    CHECK_FALSE(result.all_free);
  }
  SECTION("a GPU the host does not have is not free") {
    auto result = EvaluateGpusFree(*snapshot, {8}, 1 * kGiB);
    CHECK_FALSE(result.all_free);
    CHECK_FALSE(result.gpus[0].present);
    CHECK(result.summary == "gpus_free 8: GPU 8: no such GPU (GPUs: 0,1,2,3,4,5,6,7)");
  }
}

TEST_CASE("nvidia-smi: [N/A] memory is unknown, never 0, and unknown is not free") {
  auto snapshot = ParseNvidiaSmi(
      "0, GPU-aaaa, NVIDIA H200, [N/A], [N/A]\n1, GPU-bbbb, NVIDIA H200, 1, [N/A]\n", "");
  REQUIRE(snapshot.ok());
  CHECK_FALSE(snapshot->gpus[0].memory_used_bytes.has_value());
  CHECK_FALSE(snapshot->gpus[0].memory_total_bytes.has_value());
  CHECK(snapshot->gpus[1].memory_used_bytes == 1 * kMiB);
  CHECK_FALSE(snapshot->gpus[1].memory_total_bytes.has_value());
  auto result = EvaluateGpusFree(*snapshot, {0, 1}, 1 * kGiB);
  CHECK_FALSE(result.all_free);
  CHECK_FALSE(result.gpus[0].free);
  CHECK(result.gpus[1].free);  // an unknown total does not matter
  CHECK(result.summary == "gpus_free 0,1: GPU 0: memory used unknown");
  CHECK(boost::json::serialize(result.evidence.at("gpus").as_array()[0].at("memory_used_bytes")) ==
        "null");
}

TEST_CASE("nvidia-smi: [Not Supported] process memory (MIG) is unknown, and the process counts") {
  constexpr char kGpus[] = "0, GPU-aaaa, NVIDIA A100-SXM4-80GB, 38110, 81920\n";
  constexpr char kApps[] =
      "GPU-aaaa, 4242, python3, [Not Supported]\n"
      "GPU-aaaa, 4243, python3, [N/A]\n";
  auto snapshot = ParseNvidiaSmi(kGpus, kApps);
  REQUIRE(snapshot.ok());
  REQUIRE(snapshot->gpus[0].processes.size() == 2);
  CHECK_FALSE(snapshot->gpus[0].processes[0].used_memory_bytes.has_value());
  CHECK_FALSE(snapshot->gpus[0].processes[1].used_memory_bytes.has_value());
  auto result = EvaluateGpusFree(*snapshot, {0}, 64 * kGiB);  // memory alone would pass
  CHECK_FALSE(result.all_free);
  CHECK(result.summary ==
        "gpus_free 0: GPU 0: pid 4242 (python3) holds memory (amount unknown), pid 4243 "
        "(python3) holds memory (amount unknown)");
}

TEST_CASE("nvidia-smi: a process on a GPU UUID the GPU query did not list holds every GPU") {
  auto snapshot = ParseNvidiaSmi("0, GPU-aaaa, NVIDIA A100, 10, 81920\n",
                                 "MIG-1b2c3d4e-0000-5555-aaaa-123456789abc, 77, python3, 30\n");
  REQUIRE(snapshot.ok());
  REQUIRE(snapshot->unplaced_processes.size() == 1);
  CHECK(snapshot->unplaced_processes[0].first == "MIG-1b2c3d4e-0000-5555-aaaa-123456789abc");
  auto result = EvaluateGpusFree(*snapshot, {0}, 1 * kGiB);
  CHECK_FALSE(result.all_free);
  CHECK(result.summary ==
        "gpus_free 0: GPU 0: pid 77 (python3) runs on MIG-1b2c3d4e-0000-5555-aaaa-123456789abc, "
        "which is not in the GPU list");
}

TEST_CASE("nvidia-smi: no processes, in each shape nvidia-smi prints it") {
  for (const char* apps : {"", "\n", "No running processes found\n",
                           "gpu_uuid, pid, process_name, "
                           "used_gpu_memory [MiB]\n"}) {
    auto snapshot = ParseNvidiaSmi(kOneIdleGpu, apps);
    REQUIRE(snapshot.ok());
    CHECK(snapshot->gpus[0].processes.empty());
  }
}

TEST_CASE("nvidia-smi: whitespace, CRLF, units, a header and commas in names are tolerated") {
  constexpr char kGpus[] =
      "index, uuid, name, memory.used [MiB], memory.total [MiB]\r\n"
      "  1 ,GPU-b,  NVIDIA H200, rev 2 , 5 MiB,143771 MiB \r\n"
      "0, GPU-a, NVIDIA H200, 3, 143771\r\n";
  constexpr char kApps[] = "GPU-b, 12, /opt/my,odd/python3, 100 MiB\r\n";
  auto snapshot = ParseNvidiaSmi(kGpus, kApps);
  REQUIRE(snapshot.ok());
  REQUIRE(snapshot->gpus.size() == 2);
  CHECK(snapshot->gpus[0].index == 0);  // sorted by index
  CHECK(snapshot->gpus[1].name == "NVIDIA H200, rev 2");
  CHECK(snapshot->gpus[1].memory_used_bytes == 5 * kMiB);
  REQUIRE(snapshot->gpus[1].processes.size() == 1);
  CHECK(snapshot->gpus[1].processes[0].name == "/opt/my,odd/python3");
  CHECK(snapshot->gpus[1].processes[0].used_memory_bytes == 100 * kMiB);
}

TEST_CASE("nvidia-smi: malformed rows are errors with the line number and the line") {
  SECTION("too few fields") {
    auto snapshot = ParseNvidiaSmi("0, GPU-a, NVIDIA H200, 1, 2\n1, GPU-b, H200\n", "");
    REQUIRE_FALSE(snapshot.ok());
    CHECK(snapshot.status().message() ==
          "nvidia-smi --query-gpu line 2: expected 5 fields (index, uuid, name, memory.used, "
          "memory.total), got 3: \"1, GPU-b, H200\"");
  }
  SECTION("a memory figure that is not MiB") {
    auto snapshot = ParseNvidiaSmi("0, GPU-a, NVIDIA H200, 1.5 GiB, 2\n", "");
    REQUIRE_FALSE(snapshot.ok());
    CHECK(snapshot.status().message() ==
          "nvidia-smi --query-gpu line 1: bad memory.used '1.5 GiB' (MiB expected): \"0, GPU-a, "
          "NVIDIA H200, 1.5 GiB, 2\"");
  }
  SECTION("nvidia-smi's own error text in place of the output") {
    auto snapshot = ParseNvidiaSmi(
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "");
    REQUIRE_FALSE(snapshot.ok());
    CHECK(snapshot.status().message().rfind("nvidia-smi --query-gpu line 1: expected 5 fields",
                                            0) == 0);
  }
  SECTION("a bad pid") {
    auto snapshot = ParseNvidiaSmi(kOneIdleGpu, "\nGPU-3f9a, [N/A], python3, 10\n");
    REQUIRE_FALSE(snapshot.ok());
    CHECK(snapshot.status().message() ==
          "nvidia-smi --query-compute-apps line 2: bad pid '[N/A]': \"GPU-3f9a, [N/A], python3, "
          "10\"");
  }
  SECTION("a GPU listed twice") {
    auto snapshot = ParseNvidiaSmi("0, GPU-a, H200, 1, 2\n0, GPU-b, H200, 1, 2\n", "");
    REQUIRE_FALSE(snapshot.ok());
    CHECK(snapshot.status().message() ==
          "nvidia-smi --query-gpu line 2: GPU listed twice: \"0, GPU-b, H200, 1, 2\"");
  }
}

TEST_CASE("NVML: without a driver the error says so") {
  void* real = ::dlopen(kNvmlLibrary, RTLD_NOW | RTLD_LOCAL);
  if (real) {
    ::dlclose(real);
    WARN("this host has libnvidia-ml.so.1: the no-driver message is checked on a path instead");
  } else {
    auto snapshot = ReadNvml();
    REQUIRE_FALSE(snapshot.ok());
    CHECK(snapshot.status().message() == "no NVIDIA driver: libnvidia-ml.so.1 not found");
  }
  auto missing = ReadNvml("/nonexistent/libnvidia-ml.so.1");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "no NVIDIA driver: /nonexistent/libnvidia-ml.so.1 not found");
}

TEST_CASE("ReadGpuState: NVML first, then nvidia-smi, and both failing gives both reasons") {
  const std::string no_nvml = "/nonexistent/libnvidia-ml.so.1";
  auto snapshot = ReadGpuState(CannedNvidiaSmi(kEightGpus, kEightGpusApps), no_nvml);
  REQUIRE(snapshot.ok());
  CHECK(snapshot->source == GpuSource::kNvidiaSmi);
  CHECK(snapshot->gpus.size() == 8);

  CommandRunner absent = [](const std::vector<std::string>& argv) -> Result<std::string> {
    return Status::Error("cannot start '" + argv[0] + "': No such file or directory");
  };
  auto none = ReadGpuState(absent, no_nvml);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message() ==
        "cannot read GPU state: no NVIDIA driver: /nonexistent/libnvidia-ml.so.1 not found; "
        "nvidia-smi: cannot start 'nvidia-smi': No such file or directory");
}

TEST_CASE("BlockingCommandRunner: output, failures and a hung command") {
  CommandRunner run = BlockingCommandRunner(std::chrono::milliseconds(500));
  auto out = run({"sh", "-c", "echo one; echo two; echo noise >&2"});
  REQUIRE(out.ok());
  CHECK(out.value() == "one\ntwo\n");

  auto missing = run({"deployd-no-such-program"});
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() ==
        "cannot start 'deployd-no-such-program': No such file or directory");

  auto failed = run({"sh", "-c",
                     "echo 'NVIDIA-SMI has failed because it couldn'\"'\"'t "
                     "communicate with the NVIDIA driver.'; exit 9"});
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.status().message() ==
        "sh: exit status 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
        "driver.");

  auto started = std::chrono::steady_clock::now();
  auto hung = run({"sleep", "30"});
  REQUIRE_FALSE(hung.ok());
  CHECK(hung.status().message() == "sleep: no answer within 500ms, killed");
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(5));
}

// A stand-in libnvidia-ml.so.1, compiled here, that follows the real library's ABI as
// nvml_session.cc declares it: 24-byte process entries, NVML_ERROR_INSUFFICIENT_SIZE until the
// buffer is large enough, NVML_VALUE_NOT_AVAILABLE for unknown memory. Device 1's process list
// grows between the sizing call and the first fill, as a real one can.
constexpr char kFakeNvmlSource[] = R"(
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } Proc;
typedef struct { unsigned long long total, free, used; } Mem;
static int fills;
int nvmlInit_v2(void) { fills = 0; const char* e = getenv("FAKE_NVML_INIT"); return e ? atoi(e) : 0; }
int nvmlShutdown(void) { return 0; }
const char* nvmlErrorString(int rc) { return rc == 18 ? "Driver/library version mismatch" : "Unknown Error"; }
int nvmlDeviceGetCount_v2(unsigned* n) { *n = 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) { *d = (void*)(unsigned long)(i + 1); return 0; }
int nvmlDeviceGetUUID(void* d, char* b, unsigned n) { snprintf(b, n, "GPU-fake-%lu", (unsigned long)d - 1); return 0; }
int nvmlDeviceGetName(void* d, char* b, unsigned n) { (void)d; snprintf(b, n, "Fake H200"); return 0; }
int nvmlDeviceGetMemoryInfo(void* d, Mem* m) {
  m->total = 143771ull << 20;
  m->used = (unsigned long)d == 1 ? 512ull << 20 : 70ull << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void* d, unsigned* count, Proc* infos) {
  if ((unsigned long)d == 1) { *count = 0; return 0; }
  unsigned have = infos == NULL ? 2 : 13;
  if (infos == NULL || *count < have) { *count = have; return 7; }
  ++fills;
  for (unsigned i = 0; i < have; ++i) {
    infos[i].pid = i == 0 ? (unsigned)getpid() : 4000000 + i;
    infos[i].used = i == 1 ? ~0ull : (unsigned long long)(i + 1) << 30;
    infos[i].gi = infos[i].ci = 0xFFFFFFFFu;
  }
  *count = have;
  return 0;
}
)";

TEST_CASE("NVML: a stand-in library read through dlopen, with the size retry") {
  std::string dir = TempDir();
  {
    std::ofstream source(dir + "/fake_nvml.c");
    source << kFakeNvmlSource;
  }
  std::string library = dir + "/libnvidia-ml.so.1";
  std::string compile =
      "cc -shared -fPIC -o " + library + " " + dir + "/fake_nvml.c 2>" + dir + "/cc.log";
  if (std::system(compile.c_str()) != 0) {
    WARN("no C compiler (cc) here: the NVML stand-in test is skipped");
    return;
  }

  auto snapshot = ReadNvml(library);
  REQUIRE(snapshot.ok());
  CHECK(snapshot->source == GpuSource::kNvml);
  REQUIRE(snapshot->gpus.size() == 2);
  CHECK(snapshot->gpus[0].uuid == "GPU-fake-0");
  CHECK(snapshot->gpus[0].name == "Fake H200");
  CHECK(snapshot->gpus[0].memory_used_bytes == 512 * kMiB);
  CHECK(snapshot->gpus[0].memory_total_bytes == 143771 * kMiB);
  CHECK(snapshot->gpus[0].processes.empty());
  const auto& held = snapshot->gpus[1].processes;
  REQUIRE(held.size() == 13);  // more than the first fill's buffer (2 * 2 + 8) held
  CHECK(held[0].pid == ::getpid());
  CHECK_FALSE(held[0].name.empty());  // this test binary, named from /proc
  CHECK(held[0].used_memory_bytes == 1 * kGiB);
  CHECK_FALSE(held[1].used_memory_bytes.has_value());  // NVML_VALUE_NOT_AVAILABLE
  CHECK(held[12].pid == 4000012);
  CHECK(held[12].used_memory_bytes == 13 * kGiB);

  auto result = EvaluateGpusFree(*snapshot, {0}, 1 * kGiB);
  CHECK(result.all_free);
  CHECK(result.summary ==
        "gpus_free 0: free (no compute process; memory used at most 512MiB, max 1GiB; nvml)");

  // ReadGpuState takes NVML's answer without running nvidia-smi.
  CommandRunner must_not_run = [](const std::vector<std::string>&) -> Result<std::string> {
    FAIL("nvidia-smi run although NVML answered");
    return Status::Error("unreachable");
  };
  auto state = ReadGpuState(must_not_run, library);
  REQUIRE(state.ok());
  CHECK(state->source == GpuSource::kNvml);

  ::setenv("FAKE_NVML_INIT", "18", 1);
  auto mismatch = ReadNvml(library);
  ::unsetenv("FAKE_NVML_INIT");
  REQUIRE_FALSE(mismatch.ok());
  CHECK(mismatch.status().message() ==
        "NVML init failed: Driver/library version mismatch (the driver package was upgraded "
        "without a reboot: the loaded kernel module, /proc/driver/nvidia/version, no longer "
        "matches the library)");
  std::system(("rm -rf " + dir).c_str());
}
