#include "process/child_process.h"

#include <signal.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "test_support.h"

using namespace deployd;
namespace asio = boost::asio;

using deployd::testing::ReadFile;
using deployd::testing::TempDir;

namespace {

struct Ran {
  std::vector<std::string> lines;
  std::optional<ExitStatus> exit;
  std::shared_ptr<ChildProcess> child;
};

// Objects bound to an io_context must not outlive it: the tests' contexts are static.
Ran RunToEnd(const SpawnOptions& options) {
  static asio::io_context io;
  io.restart();
  Ran ran;
  auto started = ChildProcess::Start(
      io.get_executor(), options, [&](std::string_view l) { ran.lines.emplace_back(l); },
      [&](const ExitStatus& s) { ran.exit = s; });
  REQUIRE(started.ok());
  ran.child = started.value();
  io.run();
  return ran;
}

}  // namespace

TEST_CASE("child output arrives line by line, stdout and stderr in order") {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo one; echo two >&2; printf 'a\\rb\\nlast'; exit 3"};
  Ran ran = RunToEnd(o);
  REQUIRE(ran.exit.has_value());
  CHECK(ran.exit->code == 3);
  CHECK(ran.exit->ToString() == "exit status 3");
  CHECK(ran.lines == std::vector<std::string>{"one", "two", "a", "b", "last"});
}

TEST_CASE("every line a child wrote is delivered before its exit is reported") {
  // The pipe's data and the pidfd become ready together; the exit must wait for a read whose
  // data is already in hand (a journal look-up read its last entries after its exit once).
  static asio::io_context io;
  for (int i = 0; i < 200; ++i) {
    io.restart();
    SpawnOptions o;
    // Many small writes, the last of them just before the exit.
    o.argv = {"/bin/sh", "-c",
              "i=0; while [ $i -lt 300 ]; do echo $i; i=$((i+1)); done; echo d >&2; printf e"};
    if (i % 2) o.on_stderr_line = [](std::string_view) {};
    std::vector<std::string> lines;
    std::optional<size_t> at_exit;
    auto started = ChildProcess::Start(
        io.get_executor(), o, [&](std::string_view l) { lines.emplace_back(l); },
        [&](const ExitStatus&) { at_exit = lines.size(); });
    REQUIRE(started.ok());
    io.run();
    INFO("run " << i);
    REQUIRE(at_exit.has_value());
    CHECK(*at_exit == (i % 2 ? 301u : 302u));
    CHECK(lines.size() == *at_exit);
  }
}

TEST_CASE("stderr apart: its lines go to their own handler, both are logged") {
  TempDir dir;
  static asio::io_context io;
  io.restart();
  std::vector<std::string> out, err;
  std::optional<ExitStatus> exit;
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "echo warn 1.2 >&2; echo 0.16.0; printf 'cut' >&2"};
  o.log_path = dir.path() + "/step.log";
  o.on_stderr_line = [&](std::string_view l) { err.emplace_back(l); };
  auto started = ChildProcess::Start(
      io.get_executor(), o, [&](std::string_view l) { out.emplace_back(l); },
      [&](const ExitStatus& s) { exit = s; });
  REQUIRE(started.ok());
  io.run();
  REQUIRE(exit.has_value());
  CHECK(exit->ok());
  CHECK(out == std::vector<std::string>{"0.16.0"});
  CHECK(err == std::vector<std::string>{"warn 1.2", "cut"});
  std::string log = ReadFile(o.log_path);
  CHECK(log.find("0.16.0\n") != std::string::npos);
  CHECK(log.find("warn 1.2\n") != std::string::npos);
  CHECK(log.find("cut\n") != std::string::npos);
}

TEST_CASE("a signalled child reports the signal, not an exit code") {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "kill -KILL $$"};
  Ran ran = RunToEnd(o);
  REQUIRE(ran.exit.has_value());
  CHECK(ran.exit->signal == SIGKILL);
  CHECK(ran.exit->AsShellStatus() == 137);
  CHECK(ran.exit->ToString() == "killed by signal 9 (SIGKILL)");
}

TEST_CASE("argv is passed without a shell and env overrides apply") {
  SpawnOptions o;
  o.argv = {"printf", "%s|%s\\n", "$HOME; rm -rf /", "${DEPLOYD_TEST_X}"};
  o.env = {{"DEPLOYD_TEST_X", "from-env"}};
  Ran ran = RunToEnd(o);
  CHECK(ran.lines == std::vector<std::string>{"$HOME; rm -rf /|${DEPLOYD_TEST_X}"});
  o.argv = {"/bin/sh", "-c", "echo $DEPLOYD_TEST_X; pwd"};
  o.cwd = "/tmp";
  ran = RunToEnd(o);
  CHECK(ran.lines == std::vector<std::string>{"from-env", "/tmp"});
}

TEST_CASE("a missing program or directory is an error, not a crash") {
  asio::io_context io;
  SpawnOptions o;
  o.argv = {"deployd-no-such-program"};
  auto r = ChildProcess::Start(io.get_executor(), o, nullptr, nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == "cannot start 'deployd-no-such-program': not found on PATH");
  o.argv = {"/bin/true"};
  o.cwd = "/nonexistent-dir";
  r = ChildProcess::Start(io.get_executor(), o, nullptr, nullptr);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        "cannot start '/bin/true' in /nonexistent-dir: No such file or directory");
}

TEST_CASE("the child inherits no descriptor but stdio") {
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "ls /proc/self/fd"};
  Ran ran = RunToEnd(o);
  // 0, 1, 2 and the descriptor ls opens on /proc/self/fd itself.
  CHECK(ran.lines.size() == 4);
}

TEST_CASE("the child runs in its own process group and Terminate stops all of it") {
  asio::io_context io;
  SpawnOptions o;
  // The grandchild ignores SIGTERM, so only the SIGKILL after the grace period stops it.
  o.argv = {"/bin/sh", "-c", "trap '' TERM; (trap '' TERM; exec sleep 60) & echo $!; wait"};
  std::optional<ExitStatus> exit;
  std::shared_ptr<ChildProcess> child;
  pid_t grandchild = 0;
  auto r = ChildProcess::Start(
      io.get_executor(), o,
      [&](std::string_view line) {
        grandchild = std::stoi(std::string(line));
        child->Terminate(std::chrono::milliseconds(100));
      },
      [&](const ExitStatus& s) { exit = s; });
  REQUIRE(r.ok());
  child = r.value();
  CHECK(::getpgid(child->pid()) == child->pid());
  io.run();
  REQUIRE(exit.has_value());
  CHECK(exit->signal == SIGKILL);
  // The grandchild got the same SIGKILL; give the kernel a moment to finish it off.
  REQUIRE(grandchild > 0);
  CHECK((::getpgid(grandchild) == child->pid() || ::getpgid(grandchild) == -1));
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    std::ifstream stat("/proc/" + std::to_string(grandchild) + "/stat");
    std::string pid, comm, state;
    gone = !(stat >> pid >> comm >> state) || state == "Z";
    if (!gone) ::usleep(10000);
  }
  CHECK(gone);
}

TEST_CASE("output goes to the log file, rotated once past its cap") {
  char dir[] = "/tmp/deployd-child-XXXXXX";
  REQUIRE(::mkdtemp(dir));
  std::string log = std::string(dir) + "/step.log";
  SpawnOptions o;
  o.argv = {"/bin/sh", "-c", "for i in 1 2 3 4 5 6; do echo line$i; done"};
  o.log_path = log;
  o.log_cap_bytes = 18;  // three lines
  Ran ran = RunToEnd(o);
  CHECK(ReadFile(log + ".1") == "line1\nline2\nline3\n");
  CHECK(ReadFile(log) == "line4\nline5\nline6\n");
  CHECK(ran.child->Tail().size() == 6);
  std::remove((log + ".1").c_str());
  std::remove(log.c_str());
  ::rmdir(dir);
}
