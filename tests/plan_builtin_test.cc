// The plan keys of the built-in actions and the checks that came with them (plan.h): what a
// correct plan becomes, and every mistake's message with its position.
#include <catch2/catch.hpp>
#include <string>
#include <string_view>

#include "plan/fail_on_sets.h"
#include "plan/plan_parser.h"
#include "plan_problems.h"

using namespace deployd;
using namespace std::chrono_literals;
using deployd::testing::Problems;

namespace {

constexpr std::string_view kPivot = R"(version: 1
name: kimi
secrets:
  HF_TOKEN: {file: /etc/deployd/hf-token}
steps:
  - id: stop
    service: {unit: glm5, state: stopped, enabled: false}
  - id: kill
    kill: 'VLLM::|vllm serve'
  - id: gpus
    gpus_free: {gpus: [0, 1, 2, 3], max_used: 1GiB, stable_for: 10s, kill: true}
  - id: rm
    remove: /shared/glm5
  - id: dl
    download: {repo: nvidia/Kimi-K2.5-NVFP4, to: /shared/kimi, size: 540GB, include: ['*.safetensors', '*.json']}
    verify:
      - weights_complete: /shared/kimi
  - id: launch
    service:
      unit: kimi.service
      state: started
      enabled: true
      exec: [vllm, serve, /shared/kimi, --tensor-parallel-size, '4']
      environment: {CUDA_VISIBLE_DEVICES: '0,1,2,3'}
    watch:
      fail_on: vllm
    verify:
      - http: {url: 'http://127.0.0.1:8000/v1/models', json: {path: data.*.id, equals: /shared/kimi}}
      - version: {command: vllm, at_least: 0.15.0}
      - service: kimi
      - gpus_free: {gpus: [4]}
      - process: {match: 'VLLM::', absent: true}
)";

constexpr std::string_view kMistakes = R"(version: 1
name: t
secrets:
  HF_TOKEN: {file: hf-token}
  OTHER: hunter2
  "bad-name": {env: X}
  BOTH: {file: /a, env: B}
steps:
  - id: a
    service: {unit: kimi/x, state: running, enabeld: true}
  - id: b
    service: {unit: glm5}
  - id: c
    kill: {grace: 5s}
    env: {A: b}
  - id: d
    gpus_free: {gpus: [0, 0, 99999], grace: 5s, stable_for: 1m, within: 10s}
  - id: e
    remove: relative/dir
  - id: f
    download: {repo: kimi, to: /x, size: lots}
    background: false
  - id: g
    run: x
    kill: y
  - id: h
    run: sleep 1
    background: true
    secrets: [NOPE, HF_TOKEN]
  - id: i
    service: {unit: a.service, state: started, user: llm}
    verify:
      - version: {command: vllm}
      - http: {url: 'http://x/', json: [{path: a}, {path: b, equals: 1, contains: 2}]}
      - service: {unit: x, state: dead}
      - weights_complete: {path: /m, sha256: {a.safetensors: abc, /etc/x: 0000000000000000000000000000000000000000000000000000000000000000}}
      - process: {absent: true}
)";

}  // namespace

TEST_CASE("built-in actions: a pivot plan parses into its actions", "[plan_builtin]") {
  ParseResult r = ParsePlan(kPivot, "plan.yaml", {});
  REQUIRE(r.errors.empty());
  const Plan& plan = *r.plan;
  REQUIRE(plan.steps.size() == 6);

  const Step& stop = plan.steps[0];
  CHECK(stop.kind == ActionKind::kService);
  CHECK(stop.service.unit == "glm5.service");  // the suffix systemctl would assume
  CHECK(stop.service.state == "stopped");
  CHECK(stop.service.enabled == std::optional<bool>(false));
  CHECK(stop.watch.fail_on.empty());  // stopping follows no journal

  CHECK(plan.steps[1].kind == ActionKind::kKill);
  CHECK(plan.steps[1].kill.match == "VLLM::|vllm serve");
  CHECK(plan.steps[1].kill.grace == 10s);

  const GpusFreeAction& gpus = plan.steps[2].gpus_free;
  CHECK(gpus.gpu.gpus == std::vector<int>{0, 1, 2, 3});
  CHECK(gpus.gpu.max_used == 1ull << 30);
  CHECK(gpus.stable_for == 10s);
  CHECK(gpus.kill);

  CHECK(plan.steps[3].remove.path == "/shared/glm5");

  // A download is a background step watched by its bytes, restarted when they stall, failed
  // at once by the errors no retry fixes, and given the plan's HF_TOKEN.
  const Step& dl = plan.steps[4];
  CHECK(dl.kind == ActionKind::kDownload);
  CHECK(dl.download.repo == "nvidia/Kimi-K2.5-NVFP4");
  CHECK(dl.download.size == std::optional<std::uint64_t>(540'000'000'000ull));
  CHECK(dl.download.include == std::vector<std::string>{"*.safetensors", "*.json"});
  CHECK(dl.background);
  CHECK(dl.retries == 3);
  REQUIRE(dl.watch.progress);
  CHECK(dl.watch.progress->path == "/shared/kimi");
  CHECK(dl.watch.progress->stall_after == 10min);
  CHECK(dl.watch.progress->total == dl.download.size);
  CHECK(dl.watch.on_stall == OnStall::kRestart);
  CHECK(dl.watch.fail_on.size() == FailOnSet("hf").size());
  CHECK(dl.watch.fail_on[0].fatal);
  CHECK(dl.secrets == std::vector<std::string>{"HF_TOKEN"});

  // `fail_on: vllm` is the named set; starting a unit adds systemd's "main process died" line.
  const Step& launch = plan.steps[5];
  CHECK(launch.service.exec ==
        std::vector<std::string>{"vllm", "serve", "/shared/kimi", "--tensor-parallel-size", "4"});
  CHECK(launch.service.environment.at("CUDA_VISIBLE_DEVICES") == "0,1,2,3");
  REQUIRE(launch.watch.fail_on.size() == FailOnSet("vllm").size() + 2);
  CHECK_FALSE(launch.watch.fail_on[0].explanation.empty());
  CHECK(launch.watch.fail_on[FailOnSet("vllm").size()].pattern ==
        "^kimi\\.service: Main process exited, code=(killed|dumped|exited, status=[1-9])");

  const auto& verify = launch.verify;
  REQUIRE(verify.size() == 5);
  CHECK(verify[0].json.size() == 1);
  CHECK(verify[0].json[0].path == "data.*.id");
  CHECK(verify[0].json[0].value == "/shared/kimi");
  CHECK(verify[1].kind == CheckKind::kRun);  // a version check is `vllm --version` compared
  CHECK(verify[1].command.argv == std::vector<std::string>{"vllm", "--version"});
  CHECK(verify[1].version_at_least == "0.15.0");
  CHECK(verify[2].kind == CheckKind::kService);
  CHECK(verify[2].unit == "kimi.service");
  CHECK(verify[2].unit_state == "started");
  CHECK(verify[3].kind == CheckKind::kGpusFree);
  CHECK(verify[4].kind == CheckKind::kProcess);
  CHECK(verify[4].absent);

  // Preflight learns what the actions need before anything is changed.
  REQUIRE(plan.preflight.size() == 3);
  CHECK(plan.preflight[0].name == "systemctl");
  CHECK(plan.preflight[1].name == "hf");
  CHECK(plan.preflight[1].alternatives == std::vector<std::string>{"huggingface-cli"});
  CHECK(plan.preflight[2].kind == CheckKind::kDiskFree);
  CHECK(plan.preflight[2].path == "/shared/kimi");
  CHECK(plan.preflight[2].at_least == 540'000'000'000ull);
  CHECK(plan.preflight[2].credit_existing);
}

TEST_CASE("built-in actions: every mistake is reported where it is", "[plan_builtin]") {
  CHECK(Problems(kMistakes) == R"(4:20: 'file' must be an absolute path, not 'hf-token'
5:10: secret 'OTHER' must be {file: PATH} or {env: NAME} (its value is never written in a plan)
6:3: invalid secret name 'bad-name' (it becomes an environment variable: letters, digits, '_')
7:20: secret 'BOTH' takes 'file' or 'env', not both
10:21: invalid unit name 'kimi/x' (expected e.g. kimi.service)
10:36: 'state' must be started, stopped or restarted, not 'running'
10:45: unknown key 'enabeld' in 'service' (did you mean 'enabled'?)
12:14: 'service' needs 'state', 'enabled' or 'exec' (what should change?)
14:11: missing required key 'match' in 'kill'
15:5: 'env' cannot be used with 'kill' (a built-in action decides it)
17:16: 'within' (10s) must be at least 'stable_for' (1m)
17:27: GPU 0 is listed twice in 'gpus'
17:30: 'gpus' must be between 0 and 1023
17:38: 'grace' needs 'kill: true' (nothing is stopped without it)
19:13: 'remove' must be an absolute path, not 'relative/dir'
21:22: invalid repository 'kimi' (expected ORG/NAME, e.g. nvidia/Kimi-K2.5-NVFP4)
21:42: invalid size 'lots' (expected e.g. 512MiB, 600GiB, 1GB)
22:5: 'background' cannot be used with 'download' (a built-in action decides it)
25:5: a step has one action: 'run' or 'kill', not both
29:5: 'secrets' cannot be given to a background 'run' step (its output goes to the log without being redacted)
29:15: unknown secret 'NOPE' (define it under the plan's 'secrets:')
31:48: 'user' needs 'exec' (it goes into the unit file deployd writes)
33:18: 'version' needs 'at_least' or 'below'
34:41: a 'json' expectation needs 'equals' or 'contains'
34:73: a 'json' expectation takes 'equals' or 'contains', not both
35:35: 'state' of a 'service' check must be started or stopped, not 'dead'
36:62: invalid sha256 digest for 'a.safetensors' (expected 64 hex digits)
36:67: sha256 file names are relative to the model directory, not '/etc/x'
37:18: missing required key 'match' in 'process'
)");
}

TEST_CASE("built-in actions: a plan's own watch keys win over a download's defaults",
          "[plan_builtin]") {
  ParseResult r = ParsePlan(R"(version: 1
name: t
steps:
  - id: dl
    download: {repo: a/b, to: /m}
    retries: 0
    watch:
      progress: {path: /m, stall_after: 2s, every: 500ms}
      fail_on: 'Traceback'
)",
                            "plan.yaml", {});
  REQUIRE(r.errors.empty());
  const Step& dl = r.plan->steps[0];
  CHECK(dl.retries == 0);
  CHECK(dl.watch.on_stall == OnStall::kFail);  // no retries: nothing to restart with
  CHECK(dl.watch.progress->stall_after == 2s);
  CHECK(dl.watch.fail_on.front().pattern == "Traceback");
  CHECK(dl.watch.fail_on.size() == 1 + FailOnSet("hf").size());
}

TEST_CASE("built-in actions: GPU lists from a variable, and space counted with what is there",
          "[plan_builtin]") {
  ParseResult r = ParsePlan(R"(version: 1
name: t
vars:
  gpus: 0, 1,2
preflight:
  - disk_free: {path: /m, at_least: 600GiB, count_present: true}
steps:
  - id: free
    gpus_free: {gpus: '${gpus}'}
  - id: dl
    download: {repo: a/b, to: /m, size: 540GB}
)",
                            "plan.yaml", {});
  REQUIRE(r.errors.empty());
  CHECK(r.plan->steps[0].gpus_free.gpu.gpus == std::vector<int>{0, 1, 2});
  // The plan's own space check on the destination replaces the implied one.
  REQUIRE(r.plan->preflight.size() == 2);
  CHECK(r.plan->preflight[0].credit_existing);
  CHECK(r.plan->preflight[0].at_least == 600ull << 30);
  CHECK(r.plan->preflight[1].name == "hf");
  CHECK(Problems(R"(version: 1
name: t
steps:
  - id: free
    gpus_free: {gpus: '0,x'}
  - id: again
    gpus_free: {gpus: '1,1'}
)") == "5:23: 'gpus' must be all, a list of GPU indices or \"0,1,2,3\", not '0,x'\n"
       "7:23: GPU 1 is listed twice in 'gpus'\n");
}
