// The `service` action and probe against the systemctl and journalctl stand-ins
// (tests/standins/systemctl: real processes in a simulated host, KillMode, TimeoutStopSec,
// Restart=, the cgroup as a process group listed in cgroup/system.slice/UNIT/cgroup.procs).
// Every test gets its own simulated host; its processes are killed when the test ends.
#include "actions/service/service_action.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <thread>

#include "actions/service/service_probe.h"
#include "actions/service/unit_file.h"
#include "process/blocking_command.h"

using namespace deployd;
namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::Matches;
using Catch::Matchers::StartsWith;

namespace {

// CMake compiles tests by absolute path, so the stand-ins sit beside this file.
const fs::path kStandins = fs::path(DEPLOYD_SOURCE_DIR) / "tests" / "standins";

std::optional<std::string> GetEnv(const char* name) {
  const char* value = std::getenv(name);
  if (!value) return std::nullopt;
  return std::string(value);
}

void RestoreEnv(const char* name, const std::optional<std::string>& value) {
  if (value) {
    ::setenv(name, value->c_str(), 1);
  } else {
    ::unsetenv(name);
  }
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// A simulated host: the stand-ins first on PATH, DEPLOYD_SIM_DIR and DEPLOYD_CGROUP_ROOT
// pointing into a fresh directory. The destructor kills what the stand-ins started (simhost's
// kill_sim_processes) and restores the environment.
class SimHost {
 public:
  SimHost()
      : old_path_(GetEnv("PATH")),
        old_sim_(GetEnv("DEPLOYD_SIM_DIR")),
        old_cgroup_(GetEnv("DEPLOYD_CGROUP_ROOT")) {
    REQUIRE(fs::exists(kStandins / "systemctl"));
    std::string templ = (fs::temp_directory_path() / "deployd-service-test-XXXXXX").string();
    REQUIRE(::mkdtemp(templ.data()) != nullptr);
    dir_ = templ;
    fs::create_directories(dir_ / "units");
    ::setenv("PATH", (kStandins.string() + ":" + old_path_.value_or("/usr/bin:/bin")).c_str(), 1);
    ::setenv("DEPLOYD_SIM_DIR", dir_.c_str(), 1);
    ::setenv("DEPLOYD_CGROUP_ROOT", (dir_ / "cgroup").c_str(), 1);
  }
  ~SimHost() {
    std::string script =
        "import sys; sys.path.insert(0, sys.argv[1]); import simhost; "
        "sys.exit(len(simhost.kill_sim_processes(sys.argv[2])))";
    auto out = RunBlocking({"python3", "-c", script, kStandins.string(), dir_.string()},
                           std::chrono::seconds(30));
    CHECK(out.ok());
    if (out.ok()) CHECK(out->ok());
    RestoreEnv("PATH", old_path_);
    RestoreEnv("DEPLOYD_SIM_DIR", old_sim_);
    RestoreEnv("DEPLOYD_CGROUP_ROOT", old_cgroup_);
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  const fs::path& dir() const { return dir_; }
  fs::path unit_dir() const { return dir_ / "units"; }

  ActionContext Context() {
    ActionContext ctx;
    ctx.say = [this](std::string_view line) { said.emplace_back(line); };
    ctx.unit_dir = unit_dir().string();
    return ctx;
  }
  // Everything said so far, one line each; cleared.
  std::string TakeSaid() {
    std::string text;
    for (const std::string& line : said) text += line + "\n";
    said.clear();
    return text;
  }
  std::string CgroupProcs(const std::string& unit) const {
    return ReadFile(dir_ / "cgroup" / "system.slice" / unit / "cgroup.procs");
  }

  std::vector<std::string> said;

 private:
  fs::path dir_;
  std::optional<std::string> old_path_, old_sim_, old_cgroup_;
};

ServiceAction SleepService(const std::string& unit = "kimi.service") {
  ServiceAction action;
  action.unit = unit;
  action.state = "started";
  action.exec = {"sleep", "1000"};
  action.description = "test model server";
  return action;
}

Check ServiceCheck(const std::string& unit, const std::string& state) {
  Check check;
  check.kind = CheckKind::kService;
  check.unit = unit;
  check.unit_state = state;
  return check;
}

pid_t MainPid(const std::string& unit) {
  CheckOutcome outcome = ProbeService(ServiceCheck(unit, "started"));
  return static_cast<pid_t>(outcome.evidence.at("main_pid").as_int64());
}

bool Alive(pid_t pid) { return pid > 0 && ::kill(pid, 0) == 0; }

}  // namespace

TEST_CASE("RenderUnitFile writes the vLLM-safe defaults", "[service_action]") {
  ServiceAction action;
  action.unit = "kimi.service";
  action.exec = {"/srv/venv/bin/vllm", "serve", "/models/kimi", "--port", "8000"};
  action.environment = {
      {"CUDA_VISIBLE_DEVICES", "0,1,2,3"}, {"HF_HUB_OFFLINE", "0"}, {"NOTE", "50% of \"it\""}};
  action.user = "llm";
  action.working_directory = "/srv/llm";
  action.description = "Kimi K2.5 on vLLM (100% GPU)";
  action.stop_timeout = std::chrono::seconds(150);
  CHECK(RenderUnitFile(action) ==
        "# Written by deployd's `service` action: edit the plan, not this file; deployd\n"
        "# rewrites it when the plan's settings differ.\n"
        "[Unit]\n"
        "Description=Kimi K2.5 on vLLM (100%% GPU)\n"
        "After=network-online.target\n"
        "Wants=network-online.target\n"
        "# A server that keeps crashing ends up failed (start-limit-hit) instead of looping.\n"
        "StartLimitIntervalSec=1800\n"
        "StartLimitBurst=3\n"
        "\n"
        "[Service]\n"
        "# exec: a program that cannot be executed fails the start.\n"
        "Type=exec\n"
        "ExecStart=/srv/venv/bin/vllm serve /models/kimi --port 8000\n"
        "User=llm\n"
        "WorkingDirectory=/srv/llm\n"
        "Environment=CUDA_DEVICE_ORDER=PCI_BUS_ID\n"
        "Environment=CUDA_VISIBLE_DEVICES=0,1,2,3\n"
        "Environment=HF_HUB_OFFLINE=0\n"
        "Environment=\"NOTE=50%% of \\\"it\\\"\"\n"
        "# SIGTERM to the main process for an orderly shutdown, then SIGKILL to whatever is\n"
        "# left in the cgroup (workers included) at TimeoutStopSec.\n"
        "KillMode=mixed\n"
        "KillSignal=SIGTERM\n"
        "TimeoutStopSec=150s\n"
        "# always, not on-failure: a dead engine can exit 0.\n"
        "Restart=always\n"
        "RestartSec=30s\n"
        "LimitNOFILE=1048576\n"
        "\n"
        "[Install]\n"
        "WantedBy=multi-user.target\n");

  ServiceAction bare;
  bare.unit = "glm5.service";
  bare.exec = {"/usr/bin/sleep", "1"};
  bare.stop_timeout = std::chrono::milliseconds(1500);
  std::string text = RenderUnitFile(bare);
  CHECK_THAT(text, Contains("Description=glm5.service (deployd)\n"));
  CHECK_THAT(text, Contains("TimeoutStopSec=1500ms\n"));
  CHECK_THAT(text, Contains("Environment=HF_HUB_OFFLINE=1\n"));
  CHECK_THAT(text, !Contains("User="));
  CHECK_THAT(text, !Contains("WorkingDirectory="));
}

TEST_CASE("QuoteExecArg quotes and escapes for systemd", "[service_action]") {
  CHECK(QuoteExecArg("--port") == "--port");
  CHECK(QuoteExecArg("two words") == "\"two words\"");
  CHECK(QuoteExecArg("") == "\"\"");
  CHECK(QuoteExecArg("50%") == "50%%");
  CHECK(QuoteExecArg("$HOME") == "$$HOME");
  CHECK(QuoteExecArg("${PATH}") == "$${PATH}");
  CHECK(QuoteExecArg("it's") == "\"it's\"");
  CHECK(QuoteExecArg("say \"hi\"") == "\"say \\\"hi\\\"\"");
  CHECK(QuoteExecArg("back\\slash") == "\"back\\\\slash\"");
  CHECK(QuoteExecArg("new\nline\ttab") == "\"new\\nline\\ttab\"");
  CHECK(QuoteExecArg("bell\x07") == "\"bell\\x07\"");
  CHECK(QuoteExecArg(";") == "\\;");
  CHECK(QuoteExecArg("a;b") == "a;b");
}

TEST_CASE("ExecStart arguments reach the program exactly", "[service_action]") {
  SimHost host;
  fs::path argv_file = host.dir() / "argv.json";
  // The program writes its arguments as JSON (atomically), then stays running.
  std::string script =
      "import json, os, sys, time\n"
      "tmp = sys.argv[1] + '.tmp'\n"
      "open(tmp, 'w').write(json.dumps(sys.argv[2:]))\n"
      "os.rename(tmp, sys.argv[1])\n"
      "time.sleep(1000)\n";
  std::vector<std::string> awkward = {"two words", "",          "50%",  "%n",         "$HOME",
                                      "${PATH}",   "$$",        "it's", "say \"hi\"", "back\\slash",
                                      "new\nline", "tab\there", ";",    "a;b",        "-dash",
                                      "trailing\\"};
  ServiceAction action = SleepService();
  action.exec = {"python3", "-c", script, argv_file.string()};
  action.exec.insert(action.exec.end(), awkward.begin(), awkward.end());
  Status status = RunServiceAction(action, host.Context());
  INFO(host.TakeSaid());
  REQUIRE(status.ok());
  REQUIRE(WaitUntil([&] { return fs::exists(argv_file); }, std::chrono::seconds(20)));
  boost::json::array got = boost::json::parse(ReadFile(argv_file)).as_array();
  std::vector<std::string> args;
  for (const auto& v : got) args.emplace_back(v.as_string());
  CHECK(args == awkward);
}

TEST_CASE("service started writes the unit, starts it, and is a no-op the second time",
          "[service_action]") {
  SimHost host;
  ServiceAction action = SleepService();
  action.stop_timeout = std::chrono::seconds(20);
  Status status = RunServiceAction(action, host.Context());
  std::string said = host.TakeSaid();
  INFO(said);
  REQUIRE(status.ok());
  fs::path unit_file = host.unit_dir() / "kimi.service";
  CHECK_THAT(said, Contains("wrote " + unit_file.string()));
  CHECK_THAT(said, Contains("systemctl daemon-reload\nsystemctl start kimi.service\n"));
  CHECK_THAT(said, Matches("(.|\n)*kimi.service is active \\(running\\), main pid [0-9]+ "
                           "\\(sleep\\)\n"));
  // The program is written as the absolute path found on PATH: systemd would not search it.
  std::string text = ReadFile(unit_file);
  CHECK_THAT(text, Matches("(.|\n)*\nExecStart=/[^ ]*/sleep 1000\n(.|\n)*"));
  CHECK_THAT(text, Contains("TimeoutStopSec=20s\n"));

  CheckOutcome probe = ProbeService(ServiceCheck("kimi.service", "started"));
  CHECK(probe.passed);
  CHECK_THAT(probe.summary, Matches("service kimi.service: active \\(running\\), main pid [0-9]+"));
  CHECK(probe.evidence.at("active_state").as_string() == "active");
  CHECK(probe.evidence.at("sub_state").as_string() == "running");
  CHECK(probe.evidence.at("cgroup").as_string() == "/system.slice/kimi.service");
  CHECK(probe.evidence.at("cgroup_procs").as_array().size() == 1);
  pid_t main_pid = MainPid("kimi.service");
  REQUIRE(Alive(main_pid));

  SECTION("again: nothing changes") {
    Status again = RunServiceAction(action, host.Context());
    std::string said2 = host.TakeSaid();
    INFO(said2);
    REQUIRE(again.ok());
    CHECK(said2 == "unit file " + unit_file.string() + " unchanged\n" +
                       "kimi.service is already active (running), main pid " +
                       std::to_string(main_pid) + " (sleep); nothing to do\n");
    CHECK(MainPid("kimi.service") == main_pid);
  }
  SECTION("a changed unit file restarts the running unit") {
    action.exec = {"sleep", "2000"};
    Status again = RunServiceAction(action, host.Context());
    std::string said2 = host.TakeSaid();
    INFO(said2);
    REQUIRE(again.ok());
    CHECK_THAT(said2, Contains("the unit file changed while kimi.service was running: "
                               "restarting it\nsystemctl restart kimi.service\n"));
    CHECK(MainPid("kimi.service") != main_pid);
    CHECK_FALSE(Alive(main_pid));
  }
  SECTION("restarted gives a new main process") {
    action.state = "restarted";
    Status again = RunServiceAction(action, host.Context());
    INFO(host.TakeSaid());
    REQUIRE(again.ok());
    CHECK(MainPid("kimi.service") != main_pid);
  }
  SECTION("stopped: inactive and the cgroup proven empty; then a no-op") {
    ServiceAction stop;
    stop.unit = "kimi.service";
    stop.state = "stopped";
    Status stopped = RunServiceAction(stop, host.Context());
    std::string said2 = host.TakeSaid();
    INFO(said2);
    REQUIRE(stopped.ok());
    CHECK_THAT(said2, Contains("systemctl stop kimi.service (TimeoutStopSec 20s)\n"
                               "kimi.service is stopped: inactive (dead), no process left in "
                               "its cgroup\n"));
    CHECK(host.CgroupProcs("kimi.service") == "");
    CHECK_FALSE(Alive(main_pid));
    CheckOutcome probe2 = ProbeService(ServiceCheck("kimi.service", "stopped"));
    CHECK(probe2.passed);
    CHECK(probe2.summary == "service kimi.service: inactive (dead)");
    CHECK_FALSE(ProbeService(ServiceCheck("kimi.service", "started")).passed);

    REQUIRE(RunServiceAction(stop, host.Context()).ok());
    CHECK(host.TakeSaid() == "kimi.service is already stopped: inactive (dead)\n");
  }
}

TEST_CASE(
    "service stopped: a main process that ignores SIGTERM is killed with its children "
    "at TimeoutStopSec",
    "[service_action]") {
  SimHost host;
  ServiceAction action = SleepService("stubborn.service");
  action.exec = {"python3", "-c",
                 "import os, signal, time\n"
                 "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                 "os.fork()\n"
                 "time.sleep(1000)\n"};
  action.stop_timeout = std::chrono::seconds(1);
  REQUIRE(RunServiceAction(action, host.Context()).ok());
  host.TakeSaid();
  REQUIRE(WaitUntil(
      [&] {
        std::istringstream procs(host.CgroupProcs("stubborn.service"));
        int n = 0;
        for (pid_t pid; procs >> pid;) ++n;
        return n == 2;
      },
      std::chrono::seconds(20)));

  action.state = "stopped";
  Status status = RunServiceAction(action, host.Context());
  std::string said = host.TakeSaid();
  INFO(said);
  REQUIRE(status.ok());
  CHECK_THAT(said, Contains("stubborn.service is stopped: "));
  CHECK(ProbeService(ServiceCheck("stubborn.service", "stopped")).passed);
}

TEST_CASE("service stopped fails when a process is left in the unit's cgroup", "[service_action]") {
  SimHost host;
  // KillMode=process (never what deployd writes): systemd signals the main process only, and a
  // worker with a renamed title stays behind in the cgroup.
  WriteFile(host.unit_dir() / "glm5.service",
            "[Unit]\nDescription=old GLM-5 server\n[Service]\nType=exec\n"
            "ExecStart=/bin/bash -c \"(exec -a VLLM::Worker_TP0 sleep 1000) & exec sleep 1000\"\n"
            "KillMode=process\n[Install]\nWantedBy=multi-user.target\n");
  ServiceAction action;
  action.unit = "glm5";  // completed to glm5.service, as systemctl does
  action.state = "started";
  REQUIRE(RunServiceAction(action, host.Context()).ok());
  host.TakeSaid();
  REQUIRE(WaitUntil(
      [&] {
        std::istringstream procs(host.CgroupProcs("glm5.service"));
        int n = 0;
        for (pid_t pid; procs >> pid;) ++n;
        return n == 2;
      },
      std::chrono::seconds(20)));

  action.state = "stopped";
  Status status = RunServiceAction(action, host.Context());
  INFO(host.TakeSaid());
  REQUIRE_FALSE(status.ok());
  CHECK_THAT(status.message(), Matches("1 process left in glm5.service's cgroup after stop: "
                                       "pid [0-9]+ \\(VLLM::Worker_TP0\\)"));

  CheckOutcome probe = ProbeService(ServiceCheck("glm5.service", "stopped"));
  CHECK_FALSE(probe.passed);
  CHECK(probe.summary == "service glm5.service: inactive (dead); 1 process left in its cgroup");
  const boost::json::array& procs = probe.evidence.at("cgroup_procs").as_array();
  REQUIRE(procs.size() == 1);
  CHECK(procs[0].at("title").as_string() == "VLLM::Worker_TP0");

  // Stopping again does not hide it.
  Status again = RunServiceAction(action, host.Context());
  REQUIRE_FALSE(again.ok());
  CHECK_THAT(again.message(), Matches("1 process left in glm5.service's cgroup although it is "
                                      "inactive \\(dead\\): pid [0-9]+ \\(VLLM::Worker_TP0\\)"));
}

TEST_CASE(
    "service started: a program that exits at once fails with its ExecMainStatus and "
    "journal",
    "[service_action]") {
  SimHost host;
  ServiceAction action = SleepService();
  action.exec = {"/bin/sh", "-c", "echo 'error: unrecognized arguments: --bogus' >&2; exit 2"};
  Status status = RunServiceAction(action, host.Context());
  std::string said = host.TakeSaid();
  INFO(said);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() ==
        "kimi.service is not running (activating/auto-restart): main process exited with "
        "status 2 (ExecMainStatus=2)");
  CHECK_THAT(said, Contains("last journal lines of kimi.service:\n"));
  CHECK_THAT(said, Contains("\n  error: unrecognized arguments: --bogus\n"));

  CheckOutcome probe = ProbeService(ServiceCheck("kimi.service", "started"));
  CHECK_FALSE(probe.passed);
  CHECK(probe.summary ==
        "service kimi.service: activating (auto-restart); main process exited "
        "with status 2 (ExecMainStatus=2)");
  CHECK(probe.evidence.at("exec_main_status").as_int64() == 2);
}

TEST_CASE("service started: a program that cannot be executed fails the start (203/EXEC)",
          "[service_action]") {
  SimHost host;
  ServiceAction action = SleepService();
  action.exec = {"/nonexistent/bin/vllm", "serve"};
  Status status = RunServiceAction(action, host.Context());
  std::string said = host.TakeSaid();
  INFO(said);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() ==
        "systemctl start kimi.service failed: Job for kimi.service failed because the control "
        "process exited with error code.; main process exited with status 203 (EXEC: the "
        "program could not be executed) (ExecMainStatus=203)");
  CHECK_THAT(said, Contains("Failed to execute /nonexistent/bin/vllm"));
}

TEST_CASE("service on a unit that is not installed", "[service_action]") {
  SimHost host;
  ServiceAction action;
  action.unit = "nothing.service";
  action.state = "stopped";
  action.enabled = false;
  Status stopped = RunServiceAction(action, host.Context());
  REQUIRE(stopped.ok());
  CHECK(host.TakeSaid() ==
        "nothing.service is not installed; nothing to disable\n"
        "nothing.service is not installed; nothing to stop\n");
  CheckOutcome probe = ProbeService(ServiceCheck("nothing.service", "stopped"));
  CHECK(probe.passed);
  CHECK(probe.summary == "service nothing.service: not installed");

  action.state = "started";
  action.enabled.reset();
  Status started = RunServiceAction(action, host.Context());
  REQUIRE_FALSE(started.ok());
  CHECK(started.message() ==
        "nothing.service is not installed: no unit file (give `exec` to have deployd write one)");
  CHECK(ProbeService(ServiceCheck("nothing.service", "started")).summary ==
        "service nothing.service: not installed");

  action.enabled = true;
  action.state = "";
  Status enable = RunServiceAction(action, host.Context());
  REQUIRE_FALSE(enable.ok());
  CHECK(enable.message() ==
        "nothing.service cannot be enabled: it is not installed (LoadState=not-found)");
}

TEST_CASE("service enabled and disabled, idempotently", "[service_action]") {
  SimHost host;
  ServiceAction action = SleepService();
  action.state = "";
  action.enabled = true;
  REQUIRE(RunServiceAction(action, host.Context()).ok());
  CHECK_THAT(host.TakeSaid(), Contains("systemctl daemon-reload\nkimi.service is enabled\n"));
  Check check = ServiceCheck("kimi.service", "stopped");
  check.enabled = true;
  CheckOutcome probe = ProbeService(check);
  CHECK(probe.passed);
  CHECK(probe.summary == "service kimi.service: inactive (dead), enabled");

  REQUIRE(RunServiceAction(action, host.Context()).ok());
  CHECK_THAT(host.TakeSaid(), Contains("kimi.service is already enabled (enabled)\n"));

  action.enabled = false;
  REQUIRE(RunServiceAction(action, host.Context()).ok());
  CHECK_THAT(host.TakeSaid(), Contains("kimi.service is disabled\n"));
  probe = ProbeService(check);
  CHECK_FALSE(probe.passed);
  CHECK(probe.summary == "service kimi.service: inactive (dead); disabled (expected enabled)");

  SECTION("a unit without [Install] cannot be enabled") {
    WriteFile(host.unit_dir() / "static.service",
              "[Service]\nType=exec\nExecStart=/bin/sleep 1000\n");
    ServiceAction enable;
    enable.unit = "static.service";
    enable.enabled = true;
    Status status = RunServiceAction(enable, host.Context());
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() ==
          "static.service could not be enabled: UnitFileState=static (no [Install] section)");
  }
}

TEST_CASE("service errors a plan can cause", "[service_action]") {
  SimHost host;
  auto error = [&](ServiceAction action) {
    Status status = RunServiceAction(action, host.Context());
    REQUIRE_FALSE(status.ok());
    CHECK_FALSE(fs::exists(host.unit_dir() / "kimi.service"));
    return status.message();
  };
  ServiceAction action = SleepService();
  action.state = "running";
  CHECK(error(action) ==
        "service kimi.service: unknown state 'running' (started, stopped or restarted)");
  action = SleepService("../etc/passwd");
  CHECK(error(action) == "'../etc/passwd' is not a valid systemd unit name");
  action = SleepService("kimi.timer");
  CHECK(error(action) == "exec needs a .service unit, not 'kimi.timer'");
  action = SleepService();
  action.exec = {"no-such-program-deployd", "serve"};
  CHECK(error(action) == "exec: 'no-such-program-deployd' is not on PATH; give its absolute path");
  action.exec = {"bin/vllm", "serve"};
  CHECK(error(action) == "exec: the program 'bin/vllm' must be an absolute path or a name on PATH");
  action.exec = {"-/usr/bin/vllm"};
  CHECK(error(action) ==
        "exec: the program '-/usr/bin/vllm' starts with '-', which systemd "
        "reads as an ExecStart prefix");
  action = SleepService();
  action.environment = {{"BAD-NAME", "1"}};
  CHECK(error(action) == "environment: 'BAD-NAME' is not a valid variable name");
  action = SleepService();
  action.working_directory = "srv/llm";
  CHECK(error(action) == "working_directory 'srv/llm' must be an absolute path");
  action = SleepService();
  action.user = "llm user";
  CHECK(error(action) == "user 'llm user' is not a valid user name");

  SECTION("the unit directory cannot be written") {
    ActionContext ctx = host.Context();
    ctx.unit_dir = (host.dir() / "missing").string();
    Status status = RunServiceAction(SleepService(), ctx);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() ==
          "cannot write " + ctx.unit_dir + "/kimi.service: No such file or directory");
  }
}

TEST_CASE("service without systemctl on PATH", "[service_action]") {
  SimHost host;
  fs::path empty = host.dir() / "empty-bin";
  fs::create_directories(empty);
  std::optional<std::string> path = GetEnv("PATH");
  ::setenv("PATH", empty.c_str(), 1);
  Status status = RunServiceAction(SleepService(), host.Context());
  CheckOutcome probe = ProbeService(ServiceCheck("kimi.service", "started"));
  RestoreEnv("PATH", path);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() == "systemctl not found on PATH: the service action needs systemd");
  CHECK_FALSE(probe.passed);
  CHECK(probe.summary == "service kimi.service: systemctl not found on PATH");
}

TEST_CASE("the unit file deployd writes passes systemd-analyze verify", "[service_action]") {
  std::string script = "command -v systemd-analyze";
  auto found = RunBlocking({"/bin/sh", "-c", script}, std::chrono::seconds(10));
  if (!found.ok() || !found->ok()) {
    WARN("systemd-analyze not installed: unit file not verified");
    return;
  }
  fs::path dir = fs::temp_directory_path() / ("deployd-unit-verify-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ServiceAction action = SleepService();
  action.exec = {"/bin/sleep", "1000", "two words", "50%", "$HOME", ";"};
  action.environment = {{"NOTE", "a \"quoted\" 100% value"}};
  action.working_directory = "/tmp";
  action.user = "root";
  WriteFile(dir / "kimi.service", RenderUnitFile(action));
  auto out = RunBlocking({"systemd-analyze", "verify", (dir / "kimi.service").string()},
                         std::chrono::seconds(60));
  fs::remove_all(dir);
  REQUIRE(out.ok());
  INFO(out->out + out->err);
  CHECK(out->ok());
  // Offline, systemd-analyze may say it cannot reach the system manager: not about the unit.
  std::istringstream lines(out->out + out->err);
  std::string complaints;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.find("Failed to connect to bus") != std::string::npos) continue;
    complaints += line + "\n";
  }
  CHECK(complaints == "");
}
