// The supervisor of an attempt (`deployd --supervise`, the real binary built alongside): real
// processes, real signals, its real status file and log. Each test waits for the supervisor's
// own exit on a pidfd — the event that tells deployd every process of the attempt is gone —
// and then checks that it really is.
#include "process/supervisor.h"

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "process/process_identity.h"
#include "process/spawn.h"
#include "process/supervisor_record.h"
#include "test_support.h"

using namespace deployd;

using deployd::testing::ReadFile;
using deployd::testing::TempDir;

namespace {

struct Supervised {
  Spawned spawned;
  std::string status_file;
  std::string log_file;
};

Supervised Start(const TempDir& dir, const std::vector<std::string>& program,
                 std::chrono::milliseconds grace = std::chrono::milliseconds(300),
                 std::map<std::string, std::string> env = {},
                 std::vector<std::string> redact = {}) {
  SupervisorOptions options;
  options.status_file = dir.File("step.1.status");
  options.log_file = dir.File("step.log");
  options.grace = grace;
  options.redact = std::move(redact);
  SpawnRequest request;
  request.argv = SupervisorCommand(DEPLOYD_TEST_BIN, options);
  request.argv.insert(request.argv.end(), program.begin(), program.end());
  request.env = ChildEnvironment(env);
  Result<Spawned> spawned = Spawn(request);
  REQUIRE(spawned.ok());
  return {spawned.value(), options.status_file, options.log_file};
}

// The supervisor's exit, as deployd waits for it: its pidfd becomes readable.
int WaitForExit(const Supervised& s, int timeout_ms = 30'000) {
  pollfd p{s.spawned.pidfd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, timeout_ms) == 1);
  int status = 0;
  REQUIRE(::waitpid(s.spawned.pid, &status, 0) == s.spawned.pid);
  ::close(s.spawned.pidfd);
  return status;
}

SupervisorRecord Record(const Supervised& s) {
  Result<std::optional<SupervisorRecord>> r = ReadSupervisorRecord(s.status_file);
  REQUIRE(r.ok());
  REQUIRE(r.value().has_value());
  return *r.value();
}

// Waits (bounded) for the status file to say `running`.
SupervisorRecord WaitRunning(const Supervised& s) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    Result<std::optional<SupervisorRecord>> r = ReadSupervisorRecord(s.status_file);
    if (r.ok() && r.value() && r.value()->state == SupervisorRecord::State::kRunning)
      return *r.value();
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool Alive(pid_t pid) {
  std::optional<std::uint64_t> start = ProcessStartTime(pid);
  if (!start) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), {});
  size_t close = text.rfind(')');
  return close != std::string::npos && text.size() > close + 2 && text[close + 2] != 'Z';
}

// The pid a script wrote into `file` (bounded wait for it to appear).
pid_t PidFrom(const std::string& file) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (;;) {
    std::ifstream in(file);
    pid_t pid = 0;
    if (in >> pid && pid > 0) return pid;
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

TEST_CASE("supervisor: the action's exit status, and its output in the log") {
  TempDir dir;
  Supervised s = Start(dir, {"/bin/sh", "-c", "echo out; echo err >&2; exit 3"});
  CHECK(WEXITSTATUS(WaitForExit(s)) == 0);
  SupervisorRecord r = Record(s);
  CHECK(r.state == SupervisorRecord::State::kExited);
  CHECK(r.exit.code == 3);
  CHECK(r.exit.signal == 0);
  CHECK_FALSE(r.stopped);
  CHECK(r.left.empty());
  CHECK(ReadFile(s.log_file) == "out\nerr\n");
}

TEST_CASE("supervisor: a program that cannot start is recorded as such") {
  TempDir dir;
  Supervised s = Start(dir, {"/nonexistent/tool", "x"});
  CHECK(WEXITSTATUS(WaitForExit(s)) == 1);
  SupervisorRecord r = Record(s);
  CHECK(r.state == SupervisorRecord::State::kFailedToStart);
  CHECK(r.error == "cannot start '/nonexistent/tool': No such file or directory");
  CHECK(ReadFile(s.log_file) ==
        "deployd supervisor: cannot start '/nonexistent/tool': No such file or directory\n");
}

TEST_CASE("supervisor: what the action leaves running is stopped before it reports") {
  TempDir dir;
  std::string pid_file = dir.File("pid");
  // One child in the action's group, one escaped into a session of its own and orphaned.
  Supervised s =
      Start(dir, {"/bin/sh", "-c",
                  "sleep 1000 & echo $! > " + pid_file + "; setsid sh -c 'sleep 1001 & echo $! > " +
                      pid_file + ".2' & wait $!; echo done"});
  pid_t in_group = PidFrom(pid_file);
  pid_t escaped = PidFrom(pid_file + ".2");
  CHECK(WEXITSTATUS(WaitForExit(s)) == 0);
  // The supervisor's exit is the proof: neither is alive once it has exited.
  CHECK_FALSE(Alive(in_group));
  CHECK_FALSE(Alive(escaped));
  SupervisorRecord r = Record(s);
  CHECK(r.exit.code == 0);
  std::vector<pid_t> left;
  for (const ProcessNote& n : r.left) left.push_back(n.pid);
  CHECK(std::find(left.begin(), left.end(), in_group) != left.end());
  CHECK(std::find(left.begin(), left.end(), escaped) != left.end());
  std::string log = ReadFile(s.log_file);
  CHECK(log.find("deployd supervisor: the action ended (exit status 0); stopping what it left "
                 "running: pid ") != std::string::npos);
}

TEST_CASE("supervisor: SIGTERM stops the attempt, SIGKILL after the grace to what ignores it") {
  TempDir dir;
  std::string pid_file = dir.File("pid");
  Supervised s = Start(dir,
                       {"/bin/sh", "-c",
                        "trap '' TERM; sh -c \"trap '' TERM; echo \\$\\$ > " + pid_file +
                            "; exec sleep 1000\" & wait"},
                       std::chrono::milliseconds(200));
  SupervisorRecord running = WaitRunning(s);
  pid_t grandchild = PidFrom(pid_file);
  REQUIRE(Alive(grandchild));
  ::kill(s.spawned.pid, SIGTERM);
  CHECK(WEXITSTATUS(WaitForExit(s)) == 0);
  CHECK_FALSE(Alive(running.action.pid));
  CHECK_FALSE(Alive(grandchild));
  SupervisorRecord r = Record(s);
  CHECK(r.stopped);
  CHECK(r.exit.signal == SIGKILL);
  std::string log = ReadFile(s.log_file);
  CHECK(log.find("deployd supervisor: stopping the attempt: SIGTERM to pid") != std::string::npos);
  CHECK(log.find("deployd supervisor: SIGKILL after 200ms to pid") != std::string::npos);
}

TEST_CASE("supervisor: an action that ends on SIGTERM is recorded with that signal") {
  TempDir dir;
  Supervised s = Start(dir, {"/bin/sleep", "1000"});
  WaitRunning(s);
  ::kill(s.spawned.pid, SIGTERM);
  WaitForExit(s);
  SupervisorRecord r = Record(s);
  CHECK(r.stopped);
  CHECK(r.exit.signal == SIGTERM);
}

TEST_CASE("supervisor: secrets named by --redact never reach the log") {
  TempDir dir;
  Supervised s =
      Start(dir, {"/bin/sh", "-c", "echo token=$HF_TOKEN; echo plain"},
            std::chrono::milliseconds(300), {{"HF_TOKEN", "hf_abcdefgh1234"}}, {"HF_TOKEN"});
  WaitForExit(s);
  CHECK(ReadFile(s.log_file) == "token=***\nplain\n");
}

TEST_CASE("supervisor: a very long line is cut, and a secret across the cut is still hidden") {
  TempDir dir;
  // 65,530 'a's, the secret across the 64 KiB mark, then more.
  Supervised s = Start(dir,
                       {"/bin/sh", "-c",
                        "head -c 65530 /dev/zero | tr '\\0' a; printf %s \"$TOKEN\"; "
                        "head -c 70000 /dev/zero | tr '\\0' b; echo"},
                       std::chrono::milliseconds(300), {{"TOKEN", "s3cr3t-v4lue"}}, {"TOKEN"});
  WaitForExit(s);
  std::string log = ReadFile(s.log_file);
  CHECK(log.find("s3cr3t") == std::string::npos);
  CHECK(log.find("v4lue") == std::string::npos);
  CHECK(log.find("***") != std::string::npos);
  std::istringstream lines(log);
  for (std::string line; std::getline(lines, line);) CHECK(line.size() <= 64 * 1024);
}

TEST_CASE("supervisor: the log is rotated once past its cap") {
  TempDir dir;
  SupervisorOptions options;
  options.status_file = dir.File("s.status");
  options.log_file = dir.File("s.log");
  options.log_cap_bytes = 1000;
  SpawnRequest request;
  request.argv = SupervisorCommand(DEPLOYD_TEST_BIN, options);
  request.argv.insert(request.argv.end(),
                      {"/bin/sh", "-c", "for i in $(seq 1 300); do echo line $i; done"});
  request.env = ChildEnvironment({});
  Result<Spawned> spawned = Spawn(request);
  REQUIRE(spawned.ok());
  WaitForExit({spawned.value(), options.status_file, options.log_file});
  std::string log = ReadFile(options.log_file);
  CHECK(log.size() <= 1000);
  CHECK(log.find("line 300\n") != std::string::npos);
  CHECK(std::filesystem::exists(options.log_file + ".1"));
}

TEST_CASE("supervisor: output the log cannot take is counted in the record") {
  // /dev/full refuses every write with ENOSPC, as a full disk does.
  TempDir dir;
  SupervisorOptions options;
  options.status_file = dir.File("s.status");
  options.log_file = "/dev/full";
  options.log_cap_bytes = 0;
  SpawnRequest request;
  request.argv = SupervisorCommand(DEPLOYD_TEST_BIN, options);
  request.argv.insert(request.argv.end(), {"/bin/sh", "-c", "echo one; echo two; exit 0"});
  request.env = ChildEnvironment({});
  Result<Spawned> spawned = Spawn(request);
  REQUIRE(spawned.ok());
  Supervised s{spawned.value(), options.status_file, options.log_file};
  CHECK(WEXITSTATUS(WaitForExit(s)) == 0);
  SupervisorRecord r = Record(s);
  CHECK(r.state == SupervisorRecord::State::kExited);
  CHECK(r.exit.code == 0);
  CHECK(r.log_lost_lines == 2);
  CHECK(r.log_lost_bytes == 8);
  CHECK(r.log_error == "No space left on device");
}

TEST_CASE("supervisor: a record that cannot replace the status file is written in place") {
  TempDir dir;
  std::string path = dir.File("s.status");
  SupervisorRecord running;
  running.state = SupervisorRecord::State::kRunning;
  running.action = {42, 7, "boot"};
  running.supervisor = {41, 6, "boot"};
  REQUIRE(WriteSupervisorRecord(path, running).ok());
  CHECK(std::filesystem::file_size(path) == kStatusFileReserve);
  // No new file can be made beside it (here: a directory where the temporary file would go;
  // on a full disk: no space for one), but the old file itself can still be written.
  std::filesystem::create_directory(dir.File(".s.status.deployd-tmp"));
  SupervisorRecord exited = running;
  exited.state = SupervisorRecord::State::kExited;
  exited.exit.code = 3;
  Status s = WriteSupervisorRecord(path, exited);
  REQUIRE(s.ok());
  Result<std::optional<SupervisorRecord>> read = ReadSupervisorRecord(path);
  REQUIRE(read.ok());
  CHECK(read.value()->state == SupervisorRecord::State::kExited);
  CHECK(read.value()->exit.code == 3);
}
