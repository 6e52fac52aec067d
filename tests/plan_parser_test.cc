#include "plan/plan_parser.h"

#include <catch2/catch.hpp>
#include <string>
#include <string_view>

#include "util/units.h"

using namespace deployd;
using namespace std::chrono_literals;

namespace {

// Every diagnostic, formatted as the user sees it, one per line block.
std::string Errors(std::string_view text,
                   const std::map<std::string, std::string>& overrides = {}) {
  ParseResult result = ParsePlan(text, "plan.yaml", overrides);
  std::string out;
  for (const Diagnostic& d : result.errors) out += d.Format() + "\n";
  if (result.plan.has_value() != result.errors.empty()) out += "BUG: plan and errors disagree\n";
  return out;
}

// Uses every key of format v1 at least once.
constexpr std::string_view kFullPlan = R"(version: 1
name: kimi-k2.5
description: Replace GLM-5 with Kimi
vars:
  model_dir: /shared/kimi
  port: 8000
  flag: true
  pending: ~
preflight:
  - command: hf
  - disk_free: {path: /shared, at_least: 600GiB}
  - port_free: ${port}
  - port_free: {port: 9000, host: 127.0.0.1}
steps:
  - id: upgrade
    run: uv pip install --upgrade vllm
    env: {UV_CACHE_DIR: /tmp/uv, THREADS: 4}
    cwd: /opt
    timeout: 20m
    grace: 30s
    retries: 2
    retry_delay: 5s
    idempotent: true
    verify:
      - run: [python3, -c, 'import vllm; print(vllm.__version__)']
        version_at_least: 0.16.0rc2
        output_matches: '(?i)^0\.'
        env: {PYTHONPATH: '${model_dir}'}
        timeout: 30s
  - id: launch
    run: [vllm, serve, '${model_dir}', --port, '${port}']
    background: true
    skip_if:
      - tcp: 127.0.0.1:${port}
    watch:
      fail_on: ['CUDA out of memory', '(?i)is not supported']
    verify:
      - http:
          url: 'http://127.0.0.1:${port}/v1/completions'
          method: POST
          body: {model: kimi, max_tokens: 1, prompt: "1", stream: false, stop: [x, null]}
          status: 201
          body_contains: choices
        after: 30s
        every: 5s
        within: 1h30m
      - http: http://127.0.0.1:${port}/health
      - tcp: {port: 8001}
      - file: ${model_dir}/config.json
      - file: {path: /tmp/lock, absent: true}
      - file: {path: '${model_dir}/model.safetensors', min_size: 1.5GiB}
  - id: echo
    run: echo "$${HOME} costs $$5, flag ${flag}, ${pending}"
    watch:
      fail_on: Traceback
on_failure:
  - id: collect-logs
    run: journalctl -u kimi > /tmp/kimi.log
)";

const std::map<std::string, std::string> kFullPlanVars = {{"pending", "yes"}};

}  // namespace

TEST_CASE("a full plan parses into the expected values") {
  ParseResult result = ParsePlan(kFullPlan, "full.yaml", kFullPlanVars);
  REQUIRE(Errors(kFullPlan, kFullPlanVars) == "");
  REQUIRE(result.plan.has_value());
  const Plan& plan = *result.plan;
  CHECK(plan.version == 1);
  CHECK(plan.name == "kimi-k2.5");
  CHECK(plan.description == "Replace GLM-5 with Kimi");
  CHECK(plan.vars ==
        std::map<std::string, std::string>{
            {"model_dir", "/shared/kimi"}, {"port", "8000"}, {"flag", "true"}, {"pending", "yes"}});

  REQUIRE(plan.preflight.size() == 4);
  CHECK(plan.preflight[0].kind == CheckKind::kCommand);
  CHECK(plan.preflight[0].name == "hf");
  CHECK(plan.preflight[0].pos.line == 10);
  CHECK(plan.preflight[0].pos.column == 5);
  CHECK(plan.preflight[1].kind == CheckKind::kDiskFree);
  CHECK(plan.preflight[1].path == "/shared");
  CHECK(plan.preflight[1].at_least == 600ULL << 30);
  CHECK(plan.preflight[2].kind == CheckKind::kPortFree);
  CHECK(plan.preflight[2].port == 8000);
  CHECK(plan.preflight[2].host == "0.0.0.0");
  CHECK(plan.preflight[3].port == 9000);
  CHECK(plan.preflight[3].host == "127.0.0.1");

  REQUIRE(plan.steps.size() == 3);
  const Step& upgrade = plan.steps[0];
  CHECK(upgrade.id == "upgrade");
  CHECK(upgrade.pos.line == 15);
  CHECK(upgrade.pos.column == 5);
  CHECK(upgrade.run.shell);
  CHECK(upgrade.run.script == "uv pip install --upgrade vllm");
  CHECK(upgrade.run.Argv() ==
        std::vector<std::string>{"/bin/sh", "-c", "uv pip install --upgrade vllm"});
  CHECK(upgrade.env ==
        std::map<std::string, std::string>{{"THREADS", "4"}, {"UV_CACHE_DIR", "/tmp/uv"}});
  CHECK(upgrade.cwd == "/opt");
  CHECK(upgrade.timeout == Duration(20min));
  CHECK(upgrade.grace == Duration(30s));
  CHECK(upgrade.retries == 2);
  CHECK(upgrade.max_attempts() == 3);
  CHECK(upgrade.retry_delay == Duration(5s));
  CHECK(upgrade.idempotent);
  CHECK_FALSE(upgrade.background);
  REQUIRE(upgrade.verify.size() == 1);
  const Check& version = upgrade.verify[0];
  CHECK(version.kind == CheckKind::kRun);
  CHECK_FALSE(version.command.shell);
  CHECK(version.command.argv ==
        std::vector<std::string>{"python3", "-c", "import vllm; print(vllm.__version__)"});
  CHECK(version.version_at_least == "0.16.0rc2");
  CHECK(version.output_matches == "(?i)^0\\.");
  CHECK(version.env == std::map<std::string, std::string>{{"PYTHONPATH", "/shared/kimi"}});
  CHECK(version.timeout == Duration(30s));
  CHECK(version.after == Duration(0));
  CHECK_FALSE(version.within.has_value());

  const Step& launch = plan.steps[1];
  CHECK(launch.background);
  CHECK_FALSE(launch.timeout.has_value());
  CHECK(launch.grace == Duration(10s));
  CHECK(launch.retries == 0);
  CHECK(launch.run.argv ==
        std::vector<std::string>{"vllm", "serve", "/shared/kimi", "--port", "8000"});
  REQUIRE(launch.skip_if.size() == 1);
  CHECK(launch.skip_if[0].kind == CheckKind::kTcp);
  CHECK(launch.skip_if[0].host == "127.0.0.1");
  CHECK(launch.skip_if[0].port == 8000);
  REQUIRE(launch.watch.fail_on.size() == 2);
  CHECK(launch.watch.fail_on[0].pattern == "CUDA out of memory");
  CHECK(launch.watch.fail_on[1].pattern == "(?i)is not supported");
  CHECK(launch.watch.fail_on[1].pos.line == 36);
  CHECK(launch.watch.fail_on[1].pos.column == 39);
  REQUIRE(launch.verify.size() == 6);
  const Check& post = launch.verify[0];
  CHECK(post.kind == CheckKind::kHttp);
  CHECK(post.url == "http://127.0.0.1:8000/v1/completions");
  CHECK(post.method == "POST");
  CHECK(post.body ==
        R"({"model":"kimi","max_tokens":1,"prompt":"1","stream":false,"stop":["x",null]})");
  CHECK(post.status == 201);
  CHECK(post.body_contains == "choices");
  CHECK(post.after == Duration(30s));
  CHECK(post.every == Duration(5s));
  CHECK(post.within == Duration(90min));
  CHECK(post.timeout == Duration(10s));
  const Check& health = launch.verify[1];
  CHECK(health.url == "http://127.0.0.1:8000/health");
  CHECK(health.method == "GET");
  CHECK(health.status == 200);
  CHECK(health.body.empty());
  CHECK(health.every == Duration(1s));
  CHECK(launch.verify[2].host == "127.0.0.1");
  CHECK(launch.verify[2].port == 8001);
  CHECK(launch.verify[3].kind == CheckKind::kFile);
  CHECK(launch.verify[3].path == "/shared/kimi/config.json");
  CHECK_FALSE(launch.verify[3].absent);
  CHECK_FALSE(launch.verify[3].min_size.has_value());
  CHECK(launch.verify[4].absent);
  CHECK(launch.verify[5].min_size == 1610612736ULL);

  const Step& echo = plan.steps[2];
  CHECK(echo.run.script == "echo \"${HOME} costs $$5, flag true, yes\"");
  REQUIRE(echo.watch.fail_on.size() == 1);
  CHECK(echo.watch.fail_on[0].pattern == "Traceback");

  REQUIRE(plan.on_failure.size() == 1);
  CHECK(plan.on_failure[0].id == "collect-logs");
  CHECK(plan.on_failure[0].run.script == "journalctl -u kimi > /tmp/kimi.log");
}

TEST_CASE("variables: $${ is a literal, vars values are literal, overrides replace") {
  ParseResult result = ParsePlan(R"(version: 1
name: t
vars:
  x: one
  y: ${x}
  z: $${x}
steps:
  - id: a
    run: echo $${x} ${x} $x ${y} ${z} $ {x} $$${x}
)",
                                 "plan.yaml", {{"x", "two"}});
  REQUIRE(result.errors.empty());
  CHECK(result.plan->vars ==
        std::map<std::string, std::string>{{"x", "two"}, {"y", "${x}"}, {"z", "$${x}"}});
  CHECK(result.plan->steps[0].run.script == "echo ${x} two $x ${x} $${x} $ {x} $${x}");
}

TEST_CASE("plan errors: syntax") {
  CHECK(Errors(R"(version: 1
name: t
steps: [{id: a, run: [b, c}]
)") == R"(plan.yaml:3:27: error: invalid YAML: illegal flow end
steps: [{id: a, run: [b, c}]
                          ^
)");
  // yaml-cpp's 0-based mark becomes 1-based, and the caret copies the tab.
  CHECK(Errors("version: 1\nname: t\nsteps:\n  - id: a\n\t  run: b\n") ==
        "plan.yaml:5:1: error: invalid YAML: illegal tab when looking for indentation\n"
        "\t  run: b\n"
        "^\n");
}

TEST_CASE("plan errors: the document") {
  CHECK(Errors("") ==
        "plan.yaml: error: the plan is empty (expected a map with 'version', 'name' and "
        "'steps')\n");
  CHECK(Errors("# only a comment\n") ==
        "plan.yaml: error: the plan is empty (expected a map with 'version', 'name' and "
        "'steps')\n");
  CHECK(Errors(R"(- id: a
  run: b
)") == R"(plan.yaml:1:1: error: the plan must be a map with 'version', 'name' and 'steps'
- id: a
^
)");
  CHECK(Errors(R"(version: 1
name: t
steps: [{id: a, run: b}]
---
steps: []
)") == R"(plan.yaml:4:1: error: the plan must be a single YAML document
---
^
)");
}

TEST_CASE("plan errors: top level") {
  CHECK(Errors(R"(version: 1
name: t
stpes:
  - id: a
    run: b
)") == R"(plan.yaml:1:1: error: missing required key 'steps'
version: 1
^
plan.yaml:3:1: error: unknown top-level key 'stpes' (did you mean 'steps'?)
stpes:
^
)");
  CHECK(Errors(R"(version: 2
name: my plan
steps: []
)") == R"(plan.yaml:1:10: error: unsupported plan version '2' (expected 1)
version: 2
         ^
plan.yaml:2:7: error: invalid plan name 'my plan' (use letters, digits, '.', '_' and '-')
name: my plan
      ^
plan.yaml:3:8: error: 'steps' must not be empty
steps: []
       ^
)");
  CHECK(
      Errors(R"(version: 1
name: t
lock: gpus of host 1
steps:
  - id: a
    run: 'true'
)") ==
      R"(plan.yaml:3:7: error: invalid lock name 'gpus of host 1' (use letters, digits, '.', '_' and '-')
lock: gpus of host 1
      ^
)");
  CHECK(Errors(R"(name: t
steps:
)") == R"(plan.yaml:1:1: error: missing required key 'version'
name: t
^
plan.yaml:2:1: error: 'steps' must not be empty
steps:
^
)");
  CHECK(Errors(R"(version: [1]
name: t
secrets: [HF_TOKEN]
steps: {id: a}
)") == R"(plan.yaml:1:10: error: 'version' must be the integer 1
version: [1]
         ^
plan.yaml:3:10: error: 'secrets' must be a map of names to {file: PATH} or {env: NAME}
secrets: [HF_TOKEN]
         ^
plan.yaml:4:8: error: 'steps' must be a list of steps
steps: {id: a}
       ^
)");
}

TEST_CASE("plan errors: steps") {
  CHECK(Errors(R"(version: 1
name: t
steps:
  - id: build
    run: make
    tmeout: 5m
)") == R"(plan.yaml:6:5: error: unknown key 'tmeout' in step 'build' (did you mean 'timeout'?)
    tmeout: 5m
    ^
)");
  CHECK(Errors(R"(version: 1
name: t
steps:
  - id: build
    run: make
  - id: test
    run: make test
on_failure:
  - id: build
    run: make clean
)") == R"(plan.yaml:9:9: error: duplicate step id 'build' (first defined at line 4)
  - id: build
        ^
)");
  CHECK(Errors(R"(version: 1
name: t
steps:
  - run: make
  - id: Build
    run: make
  - id: test
    verify: []
)") == R"(plan.yaml:4:5: error: missing required key 'id' in step #1
  - run: make
    ^
plan.yaml:5:9: error: invalid step id 'Build' (use lowercase letters, digits, '_' and '-')
  - id: Build
        ^
plan.yaml:7:5: error: missing required key 'run' in step 'test' (or another action: approval, service, kill, gpus_free, remove, download)
  - id: test
    ^
)");
  CHECK(Errors(R"(version: 1
name: t
steps:
  - id: a
    run: make
    retries: three
  - id: b
    run: make
    retries: 101
  - id: c
    run: []
    background: yes
)") == R"(plan.yaml:6:14: error: 'retries' must be an integer
    retries: three
             ^
plan.yaml:9:14: error: 'retries' must be between 0 and 100
    retries: 101
             ^
plan.yaml:11:10: error: 'run' must not be an empty list
    run: []
         ^
plan.yaml:12:17: error: 'background' must be true or false
    background: yes
                ^
)");
  CHECK(
      Errors(R"(version: 1
name: t
steps:
  - id: serve
    run: vllm serve
    background: true
    timeout: 10m
)") ==
      R"(plan.yaml:7:5: error: 'timeout' cannot be used with 'background: true' (a background step is bounded by its verify 'within')
    timeout: 10m
    ^
)");
  CHECK(Errors(R"(version: 1
name: t
steps:
  - id: stop
    service: {unit: glm5.service, state: stop}
  - 42
)") == R"(plan.yaml:5:42: error: 'state' must be started, stopped or restarted, not 'stop'
    service: {unit: glm5.service, state: stop}
                                         ^
plan.yaml:6:5: error: a step must be a map with 'id' and 'run'
  - 42
    ^
)");
}

TEST_CASE("approval steps") {
  ParseResult r = ParsePlan(R"(version: 1
name: t
vars:
  who: the on-call engineer
steps:
  - id: confirm
    approval: "${who} checks the dashboard"
    retries: 1
    skip_if:
      - file: /tmp/approved
    verify:
      - file: /tmp/approved
  - id: after
    run: 'true'
)",
                            "plan.yaml", {});
  REQUIRE(r.errors.empty());
  const Step& confirm = r.plan->steps[0];
  CHECK(confirm.approval == "the on-call engineer checks the dashboard");
  CHECK(confirm.retries == 1);
  CHECK(confirm.skip_if.size() == 1);
  CHECK(confirm.verify.size() == 1);
  CHECK_FALSE(r.plan->steps[1].approval.has_value());

  CHECK(Errors(R"(version: 1
name: t
steps:
  - id: both
    run: make
    approval: ok?
  - id: empty
    approval: ""
  - id: proc
    approval: go
    background: true
    timeout: 5m
    watch: {fail_on: x}
    idempotent: true
)") == R"(plan.yaml:6:5: error: a step has one action: 'run' or 'approval', not both
    approval: ok?
    ^
plan.yaml:8:15: error: 'approval' must not be empty
    approval: ""
              ^
plan.yaml:11:5: error: 'background' cannot be used with 'approval' (an approval step runs no command)
    background: true
    ^
plan.yaml:12:5: error: 'timeout' cannot be used with 'approval' (an approval step runs no command)
    timeout: 5m
    ^
plan.yaml:13:5: error: 'watch' cannot be used with 'approval' (an approval step runs no command)
    watch: {fail_on: x}
    ^
plan.yaml:14:5: error: 'idempotent' cannot be used with 'approval' (an approval step runs no command)
    idempotent: true
    ^
)");
}

TEST_CASE("plan errors: duplicate keys in any map") {
  CHECK(Errors(R"(version: 1
name: t
steps:
  - id: a
    run: make
    timeout: 5m
    timeout: 6m
    env: {A: 1, A: 2}
)") == R"(plan.yaml:7:5: error: duplicate key 'timeout'
    timeout: 6m
    ^
plan.yaml:8:17: error: duplicate key 'A'
    env: {A: 1, A: 2}
                ^
)");
}

TEST_CASE("plan errors: durations and sizes") {
  CHECK(Errors(R"(version: 1
name: t
steps:
  - id: a
    run: make
    timeout: 5
    grace: {s: 1}
    verify:
      - disk_free: {path: /shared, at_least: 600G}
      - file: {path: /x, min_size: [1]}
)") == R"(plan.yaml:6:14: error: invalid duration '5' (expected e.g. 500ms, 15s, 10m, 8h)
    timeout: 5
             ^
plan.yaml:7:12: error: 'grace' must be a duration (expected e.g. 500ms, 15s, 10m, 8h)
    grace: {s: 1}
           ^
plan.yaml:9:46: error: invalid size '600G' (expected e.g. 512MiB, 600GiB, 1GB)
      - disk_free: {path: /shared, at_least: 600G}
                                             ^
plan.yaml:10:36: error: 'min_size' must be a size (expected e.g. 512MiB, 600GiB, 1GB)
      - file: {path: /x, min_size: [1]}
                                   ^
)");
}

TEST_CASE("plan errors: variables") {
  CHECK(Errors(R"(version: 1
name: t
vars:
  model_dir: /m
steps:
  - id: a
    run: ls ${modle_dir} ${HOME}
)") == R"(plan.yaml:7:10: error: undefined variable 'modle_dir' (did you mean 'model_dir'?)
    run: ls ${modle_dir} ${HOME}
         ^
plan.yaml:7:10: error: undefined variable 'HOME'
    run: ls ${modle_dir} ${HOME}
         ^
)");
  CHECK(Errors(R"(version: 1
name: t
vars:
  port: 8000
steps:
  - id: a
    run: ls
)",
               {{"prot", "9000"}}) ==
        "plan.yaml: error: --var 'prot': the plan declares no variable 'prot'\n");
  CHECK(Errors(R"(version: 1
name: t
vars:
  token: ~
  tag:
  port: 8000
steps:
  - id: a
    run: echo ${token} ${tag} ${port}
)",
               {{"tag", "v2"}}) ==
        R"(plan.yaml:4:3: error: variable 'token' has no value (pass --var token=VALUE)
  token: ~
  ^
)");
  CHECK(
      Errors(R"(version: 1
name: t
vars:
  1st: a
  list: [a]
steps:
  - id: a
    run: echo ${list} ${bash:-x} ${unclosed
)") ==
      R"(plan.yaml:4:3: error: invalid variable name '1st' (use letters, digits and '_', not starting with a digit)
  1st: a
  ^
plan.yaml:5:9: error: variable 'list' must be a string, a number or a boolean
  list: [a]
        ^
plan.yaml:8:10: error: invalid variable reference '${bash:-x}' (write '$${' for a literal '${')
    run: echo ${list} ${bash:-x} ${unclosed
         ^
plan.yaml:8:10: error: unterminated '${' (write '$${' for a literal '${')
    run: echo ${list} ${bash:-x} ${unclosed
         ^
)");
}

TEST_CASE("plan errors: regexes") {
  CHECK(Errors(R"(version: 1
name: t
steps:
  - id: a
    run: make
    watch:
      fail_on: ['(?i)out of memory', 'Error (code']
    verify:
      - run: make check
        output_matches: '(?i)['
)") == R"(plan.yaml:7:38: error: invalid regex 'Error (code': missing ): Error (code
      fail_on: ['(?i)out of memory', 'Error (code']
                                     ^
plan.yaml:10:25: error: invalid regex '(?i)[': missing ]: [
        output_matches: '(?i)['
                        ^
)");
}

// Patterns are RE2: what needs backtracking is refused by validate, at the pattern.
TEST_CASE("plan errors: back-references, lookaround and patterns over the bounds") {
  std::string nested = std::string(40, '(') + "x" + std::string(40, ')');
  std::string plan = R"(version: 1
name: t
steps:
  - id: a
    kill: {match: '(?<!not )vllm'}
  - id: b
    run: make
    watch:
      fail_on: ['(\w+) \1', 'error(?=: cuda)', ')" +
                     nested + R"(', ')" + std::string(5000, 'a') + R"(']
)";
  std::string errors = Errors(plan);
  CHECK(errors.starts_with(
      R"(plan.yaml:5:19: error: invalid regex '(?<!not )vllm': lookbehind ((?<= or (?<!) is not supported (patterns are RE2 syntax)
    kill: {match: '(?<!not )vllm'}
                  ^
plan.yaml:9:17: error: invalid regex '(\w+) \1': back-references (\1) are not supported (patterns are RE2 syntax)
)"));
  CHECK(
      errors.find("plan.yaml:9:29: error: invalid regex 'error(?=: cuda)': lookahead ((?=) is not "
                  "supported (patterns are RE2 syntax)\n") != std::string::npos);
  // Quoted cut to 80 bytes.
  CHECK(errors.find("plan.yaml:9:48: error: invalid regex '" + std::string(40, '(') + "x" +
                    std::string(36, ')') + "\xE2\x80\xA6': groups nested deeper than 32\n") !=
        std::string::npos);
  CHECK(errors.find("plan.yaml:9:133: error: invalid regex '" + std::string(77, 'a') +
                    "\xE2\x80\xA6': longer than 4096 bytes\n") != std::string::npos);
}

TEST_CASE("plan errors: a step's fail_on patterns too large together") {
  CHECK(
      Errors(R"(version: 1
name: t
steps:
  - id: a
    run: make
    watch:
      fail_on: ['\pL{100}', '\pL{100}', '\pL{100}', '\pL{100}', '\pL{100}']
)") ==
      R"(plan.yaml:7:7: error: 'fail_on': the patterns together are too large once compiled (over 8MiB)
      fail_on: ['\pL{100}', '\pL{100}', '\pL{100}', '\pL{100}', '\pL{100}']
      ^
)");
}

TEST_CASE("plan errors: checks") {
  CHECK(
      Errors(R"(version: 1
name: t
preflight:
  - tcp: 127.0.0.1:8000
    http: http://127.0.0.1:8000/
  - every: 5s
  - run: nvidia-smi
    every: 1s
  - command: hf download
  - http: {url: 'http://x/', stauts: 200}
  - file: /x
    output_matches: x
  - gpus
steps:
  - id: a
    run: make
)") ==
      R"(plan.yaml:5:5: error: check has more than one kind, 'tcp' and 'http' (expected exactly one of: run, http, tcp, file, command, disk_free, port_free, weights_complete, service, process, gpus_free, benchmark, version)
    http: http://127.0.0.1:8000/
    ^
plan.yaml:6:5: error: check has no kind (expected exactly one of: run, http, tcp, file, command, disk_free, port_free, weights_complete, service, process, gpus_free, benchmark, version)
  - every: 5s
    ^
plan.yaml:6:5: error: 'every' needs 'within' (how long to keep trying)
  - every: 5s
    ^
plan.yaml:8:5: error: 'every' needs 'within' (how long to keep trying)
    every: 1s
    ^
plan.yaml:9:14: error: 'command' must be a program name (e.g. hf), not a command line
  - command: hf download
             ^
plan.yaml:10:30: error: unknown key 'stauts' in 'http' (did you mean 'status'?)
  - http: {url: 'http://x/', stauts: 200}
                             ^
plan.yaml:12:5: error: 'output_matches' is only allowed in a 'run' check
    output_matches: x
    ^
plan.yaml:13:5: error: a check must be a map with one of: run, http, tcp, file, command, disk_free, port_free, weights_complete, service, process, gpus_free, benchmark, version
  - gpus
    ^
)");
  CHECK(
      Errors(R"(version: 1
name: t
steps:
  - id: a
    run: make
    verify:
      - http: https://127.0.0.1:8443/health
      - http: {url: 'http://:80/', method: PUT, status: 700}
      - http: {url: 'http://h/', body: {a: 1}}
      - disk_free: {path: /shared}
)") ==
      R"(plan.yaml:7:15: error: https is not supported in 'http' checks (probe the server on loopback over http://)
      - http: https://127.0.0.1:8443/health
              ^
plan.yaml:8:21: error: invalid url 'http://:80/' (expected http://HOST[:PORT]/PATH)
      - http: {url: 'http://:80/', method: PUT, status: 700}
                    ^
plan.yaml:8:44: error: 'method' must be GET or POST
      - http: {url: 'http://:80/', method: PUT, status: 700}
                                           ^
plan.yaml:8:57: error: 'status' must be between 100 and 599
      - http: {url: 'http://:80/', method: PUT, status: 700}
                                                        ^
plan.yaml:9:34: error: 'body' requires 'method: POST'
      - http: {url: 'http://h/', body: {a: 1}}
                                 ^
plan.yaml:10:20: error: missing required key 'at_least' in 'disk_free'
      - disk_free: {path: /shared}
                   ^
)");
  CHECK(Errors(R"(version: 1
name: t
preflight:
  - port_free: 70000
  - port_free: {port: http}
  - tcp: localhost
  - tcp: {host: localhost}
steps:
  - id: a
    run: make
)") == R"(plan.yaml:4:16: error: 'port_free' must be between 1 and 65535
  - port_free: 70000
               ^
plan.yaml:5:23: error: 'port' must be an integer
  - port_free: {port: http}
                      ^
plan.yaml:6:10: error: invalid 'tcp' address 'localhost' (expected HOST:PORT with a port from 1 to 65535)
  - tcp: localhost
         ^
plan.yaml:7:10: error: missing required key 'port' in 'tcp'
  - tcp: {host: localhost}
         ^
)");
}

TEST_CASE("plan errors: several problems are all reported, in file order") {
  std::string errors = Errors(R"(version: 1
name: t
vars:
  dir: /d
steps:
  - id: a
    run: ls ${dri}
    retries: -1
    verify:
      - file: ${dir}
        within: forever
on_failure:
  - id: a
    run: true
    idempotent: sometimes
bogus: 1
)");
  CHECK(errors == R"(plan.yaml:7:10: error: undefined variable 'dri' (did you mean 'dir'?)
    run: ls ${dri}
         ^
plan.yaml:8:14: error: 'retries' must be between 0 and 100
    retries: -1
             ^
plan.yaml:11:17: error: invalid duration 'forever' (expected e.g. 500ms, 15s, 10m, 8h)
        within: forever
                ^
plan.yaml:13:9: error: duplicate step id 'a' (first defined at line 6)
  - id: a
        ^
plan.yaml:15:17: error: 'idempotent' must be true or false
    idempotent: sometimes
                ^
plan.yaml:16:1: error: unknown top-level key 'bogus'
bogus: 1
^
)");
}

TEST_CASE("Diagnostic::Format") {
  Diagnostic d{"p.yaml", 0, 0, "no position", ""};
  CHECK(d.Format() == "p.yaml: error: no position");
  d = Diagnostic{"p.yaml", 2, 4, "tabs", "\t\tx: y"};
  CHECK(d.Format() == "p.yaml:2:4: error: tabs\n\t\tx: y\n\t\t ^");
  // "é" is two bytes and one column on screen.
  d = Diagnostic{"p.yaml", 1, 10, "utf-8", "name: é x"};
  CHECK(d.Format() == "p.yaml:1:10: error: utf-8\nname: é x\n        ^");
  // A column past the end of the line (the end of the file) still gets its caret.
  d = Diagnostic{"p.yaml", 3, 3, "end", ""};
  CHECK(d.Format() == "p.yaml:3:3: error: end\n\n  ^");
}

TEST_CASE("ParseDuration") {
  struct Case {
    std::string_view text;
    std::int64_t ms;
  };
  for (Case c : {Case{"0s", 0}, Case{"500ms", 500}, Case{"15s", 15'000}, Case{"10m", 600'000},
                 Case{"8h", 28'800'000}, Case{"1h30m", 5'400'000}, Case{"2d", 172'800'000},
                 Case{"1h0m5s250ms", 3'605'250}, Case{"2m03s", 123'000}, Case{"1.5s", 1'500},
                 Case{"0.25h", 900'000}, Case{"1.0005s", 1'000}}) {
    INFO(c.text);
    CHECK(ParseDuration(c.text) == Duration(c.ms));
  }
  for (std::string_view bad :
       {"", "5", "s", "1x", "1S", "-1s", "+1s", "1 s", " 1s", "1s ", "1.s", ".5s", "30m1h", "1m1m",
        "1ms5s", "99999999999999999999s", "9999999999999999d"}) {
    INFO(bad);
    CHECK_FALSE(ParseDuration(bad).has_value());
  }
}

TEST_CASE("ParseSize") {
  struct Case {
    std::string_view text;
    std::uint64_t bytes;
  };
  for (Case c : {Case{"0", 0}, Case{"512", 512}, Case{"1B", 1}, Case{"1kB", 1'000},
                 Case{"1KB", 1'000}, Case{"2MB", 2'000'000}, Case{"1GB", 1'000'000'000},
                 Case{"1TB", 1'000'000'000'000}, Case{"1KiB", 1024}, Case{"512MiB", 512ULL << 20},
                 Case{"600GiB", 600ULL << 30}, Case{"2TiB", 2ULL << 40},
                 Case{"1.5GiB", 1'610'612'736}, Case{"0.5kB", 500}, Case{"1.0000001KiB", 1024}}) {
    INFO(c.text);
    CHECK(ParseSize(c.text) == c.bytes);
  }
  for (std::string_view bad : {"", "GiB", "1.5", "1.5B", "1gib", "1G", "1Gb", "-1", "1 GiB",
                               "1.GiB", ".5GiB", "1GiBs", "20000000TiB", "99999999999999999999"}) {
    INFO(bad);
    CHECK_FALSE(ParseSize(bad).has_value());
  }
}

TEST_CASE("FormatDuration") {
  struct Case {
    std::int64_t ms;
    std::string_view text;
  };
  for (Case c : {Case{0, "0s"}, Case{250, "250ms"}, Case{1'000, "1s"}, Case{1'500, "1.5s"},
                 Case{1'050, "1.05s"}, Case{59'999, "59.999s"}, Case{60'000, "1m"},
                 Case{123'000, "2m03s"}, Case{90'500, "1m30.5s"}, Case{3'600'000, "1h"},
                 Case{5'400'000, "1h30m"}, Case{3'630'000, "1h00m30s"}, Case{28'800'000, "8h"},
                 Case{172'800'000, "48h"}, Case{-1'500, "-1.5s"}}) {
    INFO(c.ms);
    CHECK(FormatDuration(Duration(c.ms)) == c.text);
    if (c.ms >= 0) CHECK(ParseDuration(c.text) == Duration(c.ms));
  }
}

// ninja's habit: cut the input at every length and parse what is left. Nothing may throw or
// crash, and every diagnostic must point inside the text it was given.
TEST_CASE("every prefix of a valid plan parses without crashing") {
  for (std::size_t length = 0; length <= kFullPlan.size(); ++length) {
    std::string_view prefix = kFullPlan.substr(0, length);
    ParseResult result;
    REQUIRE_NOTHROW(result = ParsePlan(prefix, "cut.yaml", kFullPlanVars));
    INFO(prefix);
    REQUIRE(result.plan.has_value() == result.errors.empty());
    auto lines = std::count(prefix.begin(), prefix.end(), '\n') + 1;
    for (const Diagnostic& d : result.errors) {
      CHECK(d.line >= 0);
      CHECK(d.line <= lines);
      CHECK(!d.message.empty());
    }
  }
  REQUIRE(ParsePlan(kFullPlan, "full.yaml", kFullPlanVars).plan.has_value());
}

// The same for damage inside the text: each byte in turn replaced by a character that YAML
// gives meaning to.
TEST_CASE("a plan with any one byte damaged parses without crashing") {
  for (char replacement : {'\t', ':', '['}) {
    for (std::size_t i = 0; i < kFullPlan.size(); ++i) {
      std::string text(kFullPlan);
      text[i] = replacement;
      ParseResult result;
      REQUIRE_NOTHROW(result = ParsePlan(text, "bad.yaml", kFullPlanVars));
      REQUIRE(result.plan.has_value() == result.errors.empty());
    }
  }
}

TEST_CASE("a self-referencing alias does not recurse forever") {
  CHECK(Errors(R"(version: 1
name: t
steps:
  - id: a
    run: make
    verify:
      - http: {url: 'http://h/', method: POST, body: &b [*b]}
)") == R"(plan.yaml:7:58: error: an alias cannot name a node that contains it
      - http: {url: 'http://h/', method: POST, body: &b [*b]}
                                                         ^
)");
}

TEST_CASE("watch.progress parses: bytes under a path, or output lines only") {
  ParseResult result = ParsePlan(R"(version: 1
name: t
vars:
  dir: /shared/kimi
steps:
  - id: download
    run: hf download nvidia/Kimi-K2.5-NVFP4 --local-dir ${dir}
    retries: 3
    watch:
      progress: {path: '${dir}', stall_after: 10m, every: 30s, total: 595GB}
      on_stall: restart
      fail_on: GatedRepoError
  - id: load
    run: vllm serve ${dir}
    watch:
      progress: {stall_after: 20s}
  - id: plain
    run: 'true'
    watch:
      progress:
        path: /x
        stall_after: 1m
      on_stall: fail
)",
                                 "plan.yaml", {});
  REQUIRE(result.errors.empty());
  const Step& download = result.plan->steps[0];
  REQUIRE(download.watch.progress);
  CHECK(download.watch.progress->path == "/shared/kimi");
  CHECK(download.watch.progress->stall_after == Duration(10min));
  CHECK(download.watch.progress->every == Duration(30s));
  CHECK(download.watch.progress->total == 595'000'000'000ull);
  CHECK(download.watch.progress->pos.line == 10);
  CHECK(download.watch.on_stall == OnStall::kRestart);
  CHECK(download.watch.fail_on.size() == 1);
  const Step& load = result.plan->steps[1];
  REQUIRE(load.watch.progress);
  CHECK(load.watch.progress->path.empty());
  CHECK(load.watch.progress->stall_after == Duration(20s));
  CHECK(load.watch.progress->every == Duration(5s));  // the default
  CHECK_FALSE(load.watch.progress->total);
  CHECK(load.watch.on_stall == OnStall::kFail);
  const Step& plain = result.plan->steps[2];
  CHECK(plain.watch.progress->path == "/x");
  CHECK(plain.watch.on_stall == OnStall::kFail);
  CHECK_FALSE(result.plan->steps[0].watch.fail_on.empty());
}

TEST_CASE("plan errors: watch.progress and on_stall") {
  CHECK(Errors(R"(version: 1
name: t
steps:
  - id: a
    run: dl
    retries: 1
    watch:
      progress: {path: /x, stall_after: 10 minutes, every: 0.5}
  - id: b
    run: dl
    watch:
      progress: {path: /x, stall_after: 1m, every: 1m}
  - id: c
    run: dl
    watch:
      progress: {path: /x, stall_after: 3s}
  - id: d
    run: dl
    watch:
      progress: {path: /x, stal_after: 10m, every: 50ms}
  - id: e
    run: dl
    watch:
      progress: /x
      on_stall: retry
  - id: f
    run: dl
    watch:
      on_stall: restart
  - id: g
    run: dl
    watch:
      progress: {stall_after: 10m, total: 1GB}
      on_stall: restart
  - id: h
    run: dl
    retries: 2
    watch:
      progress: {path: '', stall_after: 10m}
)") == R"(plan.yaml:8:41: error: invalid duration '10 minutes' (expected e.g. 500ms, 15s, 10m, 8h)
      progress: {path: /x, stall_after: 10 minutes, every: 0.5}
                                        ^
plan.yaml:8:60: error: invalid duration '0.5' (expected e.g. 500ms, 15s, 10m, 8h)
      progress: {path: /x, stall_after: 10 minutes, every: 0.5}
                                                           ^
plan.yaml:12:52: error: 'every' (1m) must be shorter than 'stall_after' (1m)
      progress: {path: /x, stall_after: 1m, every: 1m}
                                                   ^
plan.yaml:16:41: error: 'stall_after' (3s) must be longer than 'every' (5s by default)
      progress: {path: /x, stall_after: 3s}
                                        ^
plan.yaml:20:17: error: missing required key 'stall_after' in 'progress'
      progress: {path: /x, stal_after: 10m, every: 50ms}
                ^
plan.yaml:20:28: error: unknown key 'stal_after' in 'progress' (did you mean 'stall_after'?)
      progress: {path: /x, stal_after: 10m, every: 50ms}
                           ^
plan.yaml:20:52: error: 'every' must be at least 100ms
      progress: {path: /x, stal_after: 10m, every: 50ms}
                                                   ^
plan.yaml:24:17: error: 'progress' must be a map with 'stall_after' (and 'path' to watch)
      progress: /x
                ^
plan.yaml:25:17: error: 'on_stall' must be fail or restart
      on_stall: retry
                ^
plan.yaml:29:7: error: 'on_stall' needs 'progress' (what would stall?)
      on_stall: restart
      ^
plan.yaml:33:36: error: 'total' needs 'path' (the bytes it is compared with)
      progress: {stall_after: 10m, total: 1GB}
                                   ^
plan.yaml:34:17: error: 'on_stall: restart' needs 'retries' (how many times the action may be fired again)
      on_stall: restart
                ^
plan.yaml:39:24: error: 'path' must not be empty
      progress: {path: '', stall_after: 10m}
                       ^
)");
}

TEST_CASE("weights_complete checks take a model directory") {
  ParseResult r = ParsePlan(R"(version: 1
name: w
vars:
  dir: /models/kimi
steps:
  - id: fetch
    run: 'true'
    verify:
      - weights_complete: ${dir}
        every: 30s
        within: 8h
      - weights_complete: [/x]
)",
                            "plan.yaml", {});
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].Format() ==
        "plan.yaml:12:27: error: 'weights_complete' must be the path of a model directory or a "
        "map with 'path' (and 'sha256')\n"
        "      - weights_complete: [/x]\n"
        "                          ^");
  r = ParsePlan(R"(version: 1
name: w
steps:
  - id: fetch
    run: 'true'
    verify:
      - weights_complete: /models/kimi
)",
                "plan.yaml", {});
  REQUIRE(r.plan);
  const Check& check = r.plan->steps[0].verify[0];
  CHECK(check.kind == CheckKind::kWeightsComplete);
  CHECK(check.path == "/models/kimi");
}

TEST_CASE("version_below is a run check's upper bound, validated like version_at_least") {
  ParseResult r = ParsePlan(R"(version: 1
name: v
steps:
  - id: upgrade
    run: 'true'
    verify:
      - run: vllm --version
        version_at_least: 0.15.0
        version_below: 0.17.0
      - run: vllm --version
        version_below: latest
      - http: http://127.0.0.1:8000/version
        version_below: 1.0
)",
                            "plan.yaml", {});
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].Format() ==
        "plan.yaml:11:24: error: invalid version 'latest' (expected e.g. 0.15.0 or 0.16.0rc2)\n"
        "        version_below: latest\n"
        "                       ^");
  CHECK(r.errors[1].Format() ==
        "plan.yaml:13:9: error: 'version_below' is only allowed in a 'run' check\n"
        "        version_below: 1.0\n"
        "        ^");
}
