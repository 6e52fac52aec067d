// KillPlan against real processes. Every pattern a test signals with carries a token unique to
// this test process (other checkouts may run the same tests on the same host at once); plans
// built from patterns that are not unique are inspected, never signalled.
#include "process/process_kill.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <thread>

extern char** environ;

using namespace deployd;

namespace {

std::string Token(const std::string& name) {
  return "deployd-kill-test-" + std::to_string(::getpid()) + "-" + name;
}

// Starts argv (looked up on PATH) with stdio on /dev/null; in a process group of its own
// unless `same_group`.
pid_t Spawn(const std::vector<std::string>& argv, bool same_group = false) {
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  short flags = POSIX_SPAWN_SETSIGMASK;
  if (!same_group) {
    flags |= POSIX_SPAWN_SETPGROUP;
    posix_spawnattr_setpgroup(&attr, 0);
  }
  posix_spawnattr_setflags(&attr, flags);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, argv[0].c_str(), &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  REQUIRE(rc == 0);
  return pid;
}

bool WaitUntil(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}
constexpr auto kPatience = std::chrono::seconds(15);

// The processes in group `pgid` that are alive (not zombies).
std::vector<ProcessInfo> GroupMembers(pid_t pgid) {
  std::vector<ProcessInfo> members;
  auto table = ProcessTable::Read();
  REQUIRE(table.ok());
  for (const ProcessInfo& p : table->processes()) {
    if (p.stat.pgid == pgid && p.stat.state != 'Z') members.push_back(p);
  }
  return members;
}

bool HasExecd(pid_t pid, const std::string& comm) {
  auto info = ReadProcess(pid);
  return info && info->stat.comm == comm;
}

// Waits for the child and returns its wait status; -1 if it is not our child.
int Reap(pid_t pid) {
  int status = 0;
  return ::waitpid(pid, &status, 0) == pid ? status : -1;
}

void KillAndReap(pid_t pid) {
  ::kill(pid, SIGKILL);
  Reap(pid);
}

std::vector<pid_t> Pids(const std::vector<KillTarget>& targets) {
  std::vector<pid_t> pids;
  for (const KillTarget& t : targets) pids.push_back(t.pid);
  std::sort(pids.begin(), pids.end());
  return pids;
}

bool AllGoneWithin(KillPlan& plan, std::chrono::milliseconds limit) {
  return WaitUntil([&] { return plan.Survivors().empty(); }, limit);
}

}  // namespace

TEST_CASE("kill: a parent, its children and a grandchild go down as one process group") {
  std::string token = Token("tree");
  pid_t parent = Spawn({"bash", "-c", "sleep 300 & bash -c 'sleep 300 & wait' & wait", token});
  // bash, sleep, bash, sleep — each exec done, so no process shows a half-forked command line.
  REQUIRE(WaitUntil(
      [&] {
        auto members = GroupMembers(parent);
        int sleeps = 0;
        for (const auto& m : members) sleeps += m.stat.comm == "sleep";
        return members.size() == 4 && sleeps == 2;
      },
      kPatience));
  std::vector<pid_t> expected;
  for (const auto& m : GroupMembers(parent)) expected.push_back(m.pid());
  std::sort(expected.begin(), expected.end());

  KillOptions only_match;
  only_match.pattern = token;
  only_match.whole_groups = false;
  auto narrow = KillPlan::Select(only_match);
  REQUIRE(narrow.ok());
  CHECK(Pids(narrow->targets()) == std::vector<pid_t>{parent});

  KillOptions options;
  options.pattern = token;
  auto plan = KillPlan::Select(options);
  REQUIRE(plan.ok());
  REQUIRE(Pids(plan->targets()) == expected);
  for (const KillTarget& t : plan->targets()) {
    CHECK(t.pgid == parent);
    CHECK(t.reason == (t.pid == parent ? "matches '" + token + "'"
                                       : "in process group " + std::to_string(parent)));
  }

  SignalReport report = plan->Signal(SIGTERM);
  CHECK(report.sent == 4);
  CHECK(report.errors.empty());
  CHECK(AllGoneWithin(*plan, kPatience));
  int status = Reap(parent);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGTERM);
  CHECK(GroupMembers(parent).empty());
}

TEST_CASE("kill: process titles rewritten by setproctitle, exec -a and prctl are matched") {
  SECTION("setproctitle-style rewrite of argv (perl's $0): cmdline and comm both change") {
    std::string title = "VLLM::EngineCore_" + Token("perl");
    pid_t pid = Spawn({"perl", "-e", "$0 = '" + title + "'; sleep 300"});
    REQUIRE(WaitUntil([&] { return HasExecd(pid, "VLLM::EngineCor"); }, kPatience));
    auto info = ReadProcess(pid);
    REQUIRE(info.has_value());
    CHECK(info->argv == std::vector<std::string>{title});
    CHECK(info->Title() == title);

    KillOptions options;
    options.pattern = "^" + title + "$";
    auto plan = KillPlan::Select(options);
    REQUIRE(plan.ok());
    REQUIRE(Pids(plan->targets()) == std::vector<pid_t>{pid});
    CHECK(plan->targets()[0].title == title);
    CHECK(plan->Signal(SIGTERM).sent == 1);
    CHECK(AllGoneWithin(*plan, kPatience));
    Reap(pid);
  }
  SECTION("exec -a: argv[0] is the title, comm is still the program's") {
    std::string title = "VLLM::Worker_TP0_" + Token("exec");
    pid_t pid = Spawn({"bash", "-c", "exec -a " + title + " sleep 300"});
    REQUIRE(WaitUntil([&] { return HasExecd(pid, "sleep"); }, kPatience));
    KillOptions options;
    // Anchored at both ends: only argv[0] matches, not the command line "<title> 300".
    options.pattern = "^" + title + "$";
    auto plan = KillPlan::Select(options);
    REQUIRE(plan.ok());
    REQUIRE(Pids(plan->targets()) == std::vector<pid_t>{pid});
    CHECK(plan->targets()[0].command_line == title + " 300");
    CHECK(plan->Signal(SIGTERM).sent == 1);
    CHECK(AllGoneWithin(*plan, kPatience));
    Reap(pid);
  }
  SECTION("prctl(PR_SET_NAME): only comm changes") {
    pid_t pid = Spawn({"python3", "-c",
                       "import ctypes, time; libc = ctypes.CDLL(None); "
                       "libc.prctl(15, b'VLLM::Worker_TP0', 0, 0, 0); time.sleep(300)",
                       Token("prctl")});
    if (!WaitUntil([&] { return HasExecd(pid, "VLLM::Worker_TP"); }, kPatience)) {
      KillAndReap(pid);
      FAIL("python3 did not rename itself (is python3 on PATH?)");
    }
    KillOptions options;
    options.pattern = "^VLLM::Worker_TP$";  // comm keeps 15 characters
    auto plan = KillPlan::Select(options);
    REQUIRE(plan.ok());
    auto pids = Pids(plan->targets());
    CHECK(std::count(pids.begin(), pids.end(), pid) == 1);
    // The pattern is not unique to this test: signal only our own process.
    for (const KillTarget& t : plan->targets()) {
      if (t.pid != pid) continue;
      CHECK(t.reason == "matches '^VLLM::Worker_TP$'");
      KillPlan ours = KillPlan::ForTargets({t});
      CHECK(ours.Signal(SIGTERM).sent == 1);
      CHECK(AllGoneWithin(ours, kPatience));
    }
    Reap(pid);
  }
}

TEST_CASE("kill: a process that ignores SIGTERM survives the grace and dies of SIGKILL") {
  std::string title = Token("stubborn");
  pid_t pid = Spawn({"bash", "-c", "trap '' TERM; exec -a " + title + " sleep 300"});
  REQUIRE(WaitUntil([&] { return HasExecd(pid, "sleep"); }, kPatience));
  KillOptions options;
  options.pattern = title;
  auto plan = KillPlan::Select(options);
  REQUIRE(plan.ok());
  REQUIRE(plan->targets().size() == 1);

  CHECK(plan->Signal(SIGTERM).sent == 1);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the caller's grace timer
  auto survivors = plan->Survivors();
  REQUIRE(survivors.size() == 1);
  CHECK(survivors[0].target.pid == pid);
  CHECK_FALSE(survivors[0].stuck());
  CHECK(survivors[0].Describe() ==
        "pid " + std::to_string(pid) + " (" + title + ") is still running (state S)");

  SignalReport report = plan->Signal(SIGKILL);
  CHECK(report.sent == 1);
  CHECK(AllGoneWithin(*plan, kPatience));
  int status = Reap(pid);
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGKILL);
  // Once gone, a target is reported as such and not signalled again.
  report = plan->Signal(SIGKILL);
  CHECK(report.sent == 0);
  CHECK(report.skipped ==
        std::vector<std::string>{"pid " + std::to_string(pid) + " (" + title + "): exited"});
}

TEST_CASE("kill: a record whose start time differs (a reused pid) is never signalled") {
  std::string title = Token("reuse");
  pid_t pid = Spawn({"bash", "-c", "exec -a " + title + " sleep 300"});
  REQUIRE(WaitUntil([&] { return HasExecd(pid, "sleep"); }, kPatience));
  auto stat = ReadProcStat(pid);
  REQUIRE(stat.has_value());

  KillTarget stale;
  stale.pid = pid;
  stale.start_time = stat->start_time - 1;  // the process recorded earlier had this pid
  stale.title = "old-server";
  KillPlan plan = KillPlan::ForTargets({stale});
  SignalReport report = plan.Signal(SIGKILL);
  CHECK(report.sent == 0);
  CHECK(report.skipped == std::vector<std::string>{"pid " + std::to_string(pid) +
                                                   " (old-server): pid reused, not signalled"});
  CHECK(plan.Survivors().empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto still = ReadProcStat(pid);
  REQUIRE(still.has_value());
  CHECK(still->state != 'Z');

  // The same record with the right start time is signalled.
  KillTarget current = stale;
  current.start_time = stat->start_time;
  KillPlan right = KillPlan::ForTargets({current});
  CHECK(right.Signal(SIGKILL).sent == 1);
  CHECK(AllGoneWithin(right, kPatience));
  Reap(pid);
}

TEST_CASE("kill: never deployd itself, its ancestors, pid 1 or the deployd binary") {
  SECTION("named by pid") {
    KillOptions options;
    options.pids = {::getpid(), ::getppid(), 1};
    auto plan = KillPlan::Select(options);
    REQUIRE(plan.ok());
    CHECK(plan->targets().empty());
    std::vector<std::string> why;
    for (const auto& e : plan->excluded())
      why.push_back(std::to_string(e.process.pid) + " " + e.why);
    std::sort(why.begin(), why.end());
    std::vector<std::string> expected = {
        "1 is pid 1", std::to_string(::getpid()) + " is deployd itself",
        std::to_string(::getppid()) + " is an ancestor of deployd"};
    std::sort(expected.begin(), expected.end());
    CHECK(why == expected);
  }
  SECTION("matched by a pattern (this plan is inspected, never signalled)") {
    auto self = ReadProcess(::getpid());
    REQUIRE(self.has_value());
    KillOptions options;
    options.pattern = "^" + self->stat.comm + "$";
    auto plan = KillPlan::Select(options);
    REQUIRE(plan.ok());
    auto pids = Pids(plan->targets());
    CHECK(std::count(pids.begin(), pids.end(), ::getpid()) == 0);
    bool self_excluded = false;
    for (const auto& e : plan->excluded()) {
      if (e.process.pid == ::getpid()) self_excluded = e.why == "is deployd itself";
    }
    CHECK(self_excluded);
  }
  SECTION("another process running this binary (a supervisor, a second daemon)") {
    // A second copy of this test binary that waits for a key before running anything.
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, pipe_fds[0], 0);
    posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    char self_exe[] = "/proc/self/exe";
    char wait_flag[] = "--wait-for-keypress";
    char when[] = "start";
    char filter[] = "no such test";
    char* args[] = {self_exe, wait_flag, when, filter, nullptr};
    pid_t twin = 0;
    REQUIRE(::posix_spawn(&twin, self_exe, &actions, nullptr, args, environ) == 0);
    posix_spawn_file_actions_destroy(&actions);
    ::close(pipe_fds[0]);
    REQUIRE(WaitUntil([&] { return ReadProcess(twin).has_value(); }, kPatience));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));  // past exec

    KillOptions options;
    options.pids = {twin};
    auto plan = KillPlan::Select(options);
    REQUIRE(plan.ok());
    CHECK(plan->targets().empty());
    REQUIRE(plan->excluded().size() == 1);
    CHECK(plan->excluded()[0].why == "runs the deployd binary");
    ::close(pipe_fds[1]);
    KillAndReap(twin);
  }
  SECTION("a binary the caller protects") {
    std::string title = Token("protected");
    pid_t pid = Spawn({"bash", "-c", "exec -a " + title + " sleep 300"});
    REQUIRE(WaitUntil([&] { return HasExecd(pid, "sleep"); }, kPatience));
    KillOptions options;
    options.pattern = title;
    options.protected_exes = {"/bin/sleep"};  // /bin is a link to /usr/bin on Debian 12
    auto plan = KillPlan::Select(options);
    REQUIRE(plan.ok());
    CHECK(plan->targets().empty());
    REQUIRE(plan->excluded().size() == 1);
    CHECK(plan->excluded()[0].process.pid == pid);
    CHECK(plan->excluded()[0].why == "runs a protected binary");
    KillAndReap(pid);
  }
}

TEST_CASE("kill: the caller's own process group is never taken whole") {
  std::string title = Token("samegroup");
  pid_t pid = Spawn({"bash", "-c", "exec -a " + title + " sleep 300"}, /*same_group=*/true);
  REQUIRE(WaitUntil([&] { return HasExecd(pid, "sleep"); }, kPatience));
  KillOptions options;
  options.pattern = title;
  auto plan = KillPlan::Select(options);
  REQUIRE(plan.ok());
  REQUIRE(Pids(plan->targets()) == std::vector<pid_t>{pid});
  CHECK(plan->targets()[0].pgid == ::getpgrp());
  CHECK(plan->Signal(SIGKILL).sent == 1);
  CHECK(AllGoneWithin(*plan, kPatience));
  Reap(pid);
}

TEST_CASE("kill: a child forked into a target's group after the plan was made is signalled too") {
  char fifo_dir[] = "/tmp/deployd-kill-test-XXXXXX";
  REQUIRE(::mkdtemp(fifo_dir) != nullptr);
  std::string fifo = std::string(fifo_dir) + "/go";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::string token = Token("forks");
  pid_t parent = Spawn({"bash", "-c", "read x < " + fifo + "; sleep 300 & wait", token});
  REQUIRE(WaitUntil([&] { return GroupMembers(parent).size() == 1; }, kPatience));

  KillOptions options;
  options.pattern = token;
  auto plan = KillPlan::Select(options);
  REQUIRE(plan.ok());
  REQUIRE(Pids(plan->targets()) == std::vector<pid_t>{parent});

  int fd = ::open(fifo.c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, "go\n", 3) == 3);
  ::close(fd);
  REQUIRE(WaitUntil(
      [&] {
        for (const auto& m : GroupMembers(parent)) {
          if (m.stat.ppid == parent && m.stat.comm == "sleep") return true;
        }
        return false;
      },
      kPatience));

  SignalReport report = plan->Signal(SIGTERM);
  CHECK(report.sent == 2);
  auto targets = plan->targets();
  REQUIRE(targets.size() == 2);
  CHECK(targets[1].reason == "in process group " + std::to_string(parent));
  CHECK(AllGoneWithin(*plan, kPatience));
  Reap(parent);
  CHECK(GroupMembers(parent).empty());
  ::unlink(fifo.c_str());
  ::rmdir(fifo_dir);
}

TEST_CASE("kill: a zombie counts as gone") {
  std::string title = Token("zombie");
  pid_t pid = Spawn({"bash", "-c", "exec -a " + title + " sleep 300"});
  REQUIRE(WaitUntil([&] { return HasExecd(pid, "sleep"); }, kPatience));
  KillOptions options;
  options.pattern = title;
  auto plan = KillPlan::Select(options);
  REQUIRE(plan.ok());
  CHECK(plan->Signal(SIGKILL).sent == 1);
  // Not reaped yet: it lingers as a zombie of this process.
  REQUIRE(WaitUntil(
      [&] {
        auto stat = ReadProcStat(pid);
        return stat && stat->state == 'Z';
      },
      kPatience));
  CHECK(plan->Survivors().empty());
  Reap(pid);
}

TEST_CASE("kill: an invalid pattern is an error, not an exception") {
  KillOptions options;
  options.pattern = "VLLM::(";
  auto plan = KillPlan::Select(options);
  REQUIRE_FALSE(plan.ok());
  CHECK(plan.status().message().rfind("invalid pattern 'VLLM::(': ", 0) == 0);
}

TEST_CASE("kill: a survivor in state D is reported as stuck in the kernel") {
  Survivor stuck;
  stuck.target.pid = 80701;
  stuck.target.title = "VLLM::Worker_TP0";
  stuck.state = 'D';
  CHECK(stuck.stuck());
  CHECK(stuck.Describe() ==
        "pid 80701 (VLLM::Worker_TP0) is stuck in the kernel (state D): needs a reboot");
  Survivor running = stuck;
  running.target.pid = 80702;
  running.state = 'R';
  CHECK_FALSE(running.stuck());
  CHECK(DescribeSurvivors({stuck, running}) ==
        "pid 80701 (VLLM::Worker_TP0) is stuck in the kernel (state D): needs a reboot; "
        "pid 80702 (VLLM::Worker_TP0) is still running (state R)");
}
