// The `gpus_free` action and probe on a simulated GPU host: the nvidia-smi stand-in first on
// PATH, DEPLOYD_SIM_DIR a temporary directory, NVML turned off (DEPLOYD_NVML=off) so that a
// driver on the test host does not answer instead. GPU memory is "held" by real processes this
// test starts (gpu-procs/PID.json): the only pids gpus_free can stop here.
#include "actions/gpu/gpus_free_action.h"

#include <dlfcn.h>

#include "action_test_helpers.h"
#include "actions/gpu/gpu_state.h"

using namespace deployd;
using namespace deployd::testing;

namespace {

constexpr char kNoDriverLine[] =
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
    "the latest NVIDIA driver is installed and running.";

// A simulated host with 4 idle GPUs (4MiB used each), its stand-ins first on PATH.
struct SimHost {
  TempDir dir;
  ScopedEnv env;
  explicit SimHost(bool with_standins = true) {
    dir.Write("gpus.json", "{\"count\": 4}\n");
    env.Set("DEPLOYD_SIM_DIR", dir.path());
    env.Set("DEPLOYD_NVML", "off");
    const char* path = std::getenv("PATH");
    // Without the stand-ins: a PATH where no nvidia-smi can be found.
    env.Set("PATH",
            with_standins ? StandinsDir() + ":" + (path ? path : "/usr/bin:/bin") : dir.path());
  }
};

GpusFreeAction Action(std::vector<int> gpus) {
  GpusFreeAction action;
  action.gpu.gpus = std::move(gpus);
  action.every = std::chrono::milliseconds(100);
  action.stable_for = std::chrono::milliseconds(300);
  action.within = std::chrono::seconds(30);
  action.grace = std::chrono::seconds(1);
  return action;
}

Check GpusCheck(std::vector<int> gpus) {
  Check check;
  check.kind = CheckKind::kGpusFree;
  check.gpu.gpus = std::move(gpus);
  return check;
}

pid_t MemberTitled(pid_t pgid, const std::string& title) {
  for (const ProcessInfo& p : GroupMembers(pgid)) {
    if (p.Title() == title) return p.pid();
  }
  return 0;
}

struct Holders {
  Tree tree;
  pid_t tp0 = 0;
  pid_t tp1 = 0;
  explicit Holders(const SimHost& host) {
    StartTree(tree, host.dir, {"gpu", Token("gpu")}, 3);
    tp0 = MemberTitled(tree.leader, "VLLM::Worker_TP0");
    tp1 = MemberTitled(tree.leader, "VLLM::Worker_TP1");
    REQUIRE(tp0 > 0);
    REQUIRE(tp1 > 0);
  }
  std::string Busy() const {
    return "GPU 0: pid " + std::to_string(tp0) +
           " (VLLM::Worker_TP0) holds 70GiB, memory used 70GiB, max 1GiB; GPU 1: pid " +
           std::to_string(tp1) + " (VLLM::Worker_TP1) holds 70GiB, memory used 70GiB, max 1GiB";
  }
};

}  // namespace

TEST_CASE("gpus_free: idle GPUs stay free for stable_for", "[gpus_free_action]") {
  SimHost host;
  Said said;
  Status status = RunGpusFreeAction(Action({0, 1}), said.ctx);
  INFO(said.All());
  REQUIRE(status.ok());
  CHECK(said.lines ==
        std::vector<std::string>{"GPUs 0,1 free (no compute process; memory used at most 4MiB, "
                                 "max 1GiB; nvidia-smi); waiting 300ms for it to stay so",
                                 "free for 300ms"});
}

TEST_CASE("gpus_free: with kill, the holders are stopped and the GPUs proven free",
          "[gpus_free_action]") {
  SimHost host;
  Holders holders(host);
  GpusFreeAction action = Action({0, 1});
  action.kill = true;
  Said said;
  Status status = RunGpusFreeAction(action, said.ctx);
  INFO(said.All());
  REQUIRE(status.ok());
  std::string group = ", group " + std::to_string(holders.tree.leader);
  std::string tp0 = "pid " + std::to_string(holders.tp0) + " (VLLM::Worker_TP0)";
  std::string tp1 = "pid " + std::to_string(holders.tp1) + " (VLLM::Worker_TP1)";
  CHECK(said.Has("GPU 0: " + tp0 + " holds 70GiB, memory used 70GiB, max 1GiB"));
  CHECK(said.Has("GPU 1: " + tp1 + " holds 70GiB, memory used 70GiB, max 1GiB"));
  // The whole process group goes: the "API server" too, though it holds no GPU.
  CHECK(said.Has("SIGTERM pid " + std::to_string(holders.tree.leader) + " (python3)" + group));
  CHECK(said.Has("SIGTERM " + tp0 + group));
  CHECK(said.Has("SIGKILL " + tp1 + group));
  CHECK(said.Has("3 processes stopped: 2 by SIGTERM, 1 by SIGKILL after 1s"));
  CHECK(
      said.Has("GPUs 0,1 free (no compute process; memory used at most 4MiB, max 1GiB; "
               "nvidia-smi); waiting 300ms for it to stay so"));
  CHECK(said.lines.back() == "free for 300ms");
  CHECK_FALSE(Alive(holders.tp0));
  CHECK_FALSE(Alive(holders.tp1));
  CHECK_FALSE(Alive(holders.tree.leader));
}

TEST_CASE("gpus_free: without kill, busy GPUs fail after within, naming the holders",
          "[gpus_free_action]") {
  SimHost host;
  Holders holders(host);
  GpusFreeAction action = Action({0, 1, 2});
  action.within = std::chrono::milliseconds(300);
  Said said;
  Status status = RunGpusFreeAction(action, said.ctx);
  INFO(said.All());
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() == "GPUs 0,1,2 not free within 300ms: " + holders.Busy());
  CHECK(said.lines.size() == 2);  // the holders once, not once per read
  CHECK(Alive(holders.tp0));
  CHECK(Alive(holders.tp1));
}

TEST_CASE("gpus_free: free but not for stable_for within the time allowed", "[gpus_free_action]") {
  SimHost host;
  GpusFreeAction action = Action({0});
  action.stable_for = std::chrono::hours(1);
  action.within = std::chrono::milliseconds(300);
  Said said;
  Status status = RunGpusFreeAction(action, said.ctx);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message().rfind("GPU 0 not free for 1h within 300ms (free for the last ", 0) == 0);
}

TEST_CASE("gpus_free: a GPU that is not there is an error at once", "[gpus_free_action]") {
  SimHost host;
  Said said;
  Status status = RunGpusFreeAction(Action({0, 9}), said.ctx);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() == "gpus_free 0,9: GPU 9: no such GPU (GPUs: 0,1,2,3)");
}

TEST_CASE("gpus_free: no driver gives both reasons", "[gpus_free_action]") {
  SECTION("nvidia-smi not installed") {
    SimHost host(/*with_standins=*/false);
    Said said;
    Status status = RunGpusFreeAction(Action({0}), said.ctx);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() ==
          "cannot read GPU state: NVML turned off (DEPLOYD_NVML=off); nvidia-smi: cannot start "
          "'nvidia-smi': No such file or directory");
    CheckOutcome probe = ProbeGpusFree(GpusCheck({0}));
    CHECK_FALSE(probe.passed);
    CHECK(probe.summary == "gpus_free 0: " + status.message());
    CHECK(probe.evidence.at("error").as_string() == status.message());
  }
  SECTION("nvidia-smi cannot talk to the driver") {
    SimHost host;
    host.dir.Write("nvidia-smi-no-driver", "");
    Said said;
    Status status = RunGpusFreeAction(Action({0}), said.ctx);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() ==
          std::string("cannot read GPU state: NVML turned off (DEPLOYD_NVML=off); nvidia-smi: "
                      "exit status 9: ") +
              kNoDriverLine);
  }
  SECTION("and no NVML library, where this host has none") {
    void* nvml = ::dlopen(kNvmlLibrary, RTLD_NOW | RTLD_LOCAL);
    if (nvml) {
      ::dlclose(nvml);
      WARN("this host has " << kNvmlLibrary << ": the no-driver message is not checked here");
      return;
    }
    SimHost host(/*with_standins=*/false);
    host.env.Set("DEPLOYD_NVML", std::nullopt);
    Said said;
    Status status = RunGpusFreeAction(Action({0}), said.ctx);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() ==
          "cannot read GPU state: no NVIDIA driver: libnvidia-ml.so.1 not found; nvidia-smi: "
          "cannot start 'nvidia-smi': No such file or directory");
  }
}

TEST_CASE("gpus_free probe: one read, both ways", "[gpus_free_action]") {
  SimHost host;
  CheckOutcome idle = ProbeGpusFree(GpusCheck({0, 1}));
  CHECK(idle.passed);
  CHECK(idle.summary ==
        "gpus_free 0,1: free (no compute process; memory used at most 4MiB, max 1GiB; "
        "nvidia-smi)");
  CHECK(idle.evidence.at("check") == "gpus_free");
  CHECK(idle.evidence.at("target") == "0,1");
  CHECK(idle.evidence.at("source") == "nvidia-smi");

  Holders holders(host);
  CheckOutcome busy = ProbeGpusFree(GpusCheck({0, 1}));
  CHECK_FALSE(busy.passed);
  CHECK(busy.summary == "gpus_free 0,1: " + holders.Busy());
  CHECK(Alive(holders.tp0));

  CheckOutcome all = ProbeGpusFree(GpusCheck({}));
  CHECK_FALSE(all.passed);
  CHECK(all.evidence.at("target") == "all");
  CHECK(all.evidence.at("gpus").as_array().size() == 4);
}

TEST_CASE("gpus_free: a holder is signalled only while its pid still names what the GPU said") {
  std::optional<ProcessInfo> me = ReadProcess(::getpid());
  REQUIRE(me.has_value());
  CHECK(SameProcessName(me->Title(), *me));
  CHECK(SameProcessName(me->stat.comm, *me));
  CHECK(SameProcessName("/some/where/" + me->stat.comm, *me));
  CHECK_FALSE(SameProcessName("VLLM::Worker_TP0", *me));
  CHECK_FALSE(SameProcessName("/usr/bin/python3", *me));
}
