// Shared by kill_action_test.cc and gpus_free_action_test.cc: real process trees shaped like
// vLLM's, started by a small Python helper, and the environment of the simulated GPU host.
//
// Every tree a test starts is in a process group of its own and carries a token unique to the
// test process in its command line; the tests signal nothing else (their kill patterns contain
// the token, and gpus_free stops only the pids the simulated host in their own temporary
// directory lists).
#ifndef DEPLOYD_TESTS_ACTION_TEST_HELPERS_H_
#define DEPLOYD_TESTS_ACTION_TEST_HELPERS_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actions/builtin_action.h"
#include "process/process_table.h"
#include "test_support.h"

extern char** environ;

namespace deployd::testing {

inline std::string StandinsDir() {
  return std::filesystem::path(__FILE__).parent_path().string() + "/standins";
}

inline std::string Token(const std::string& name) {
  return "deployd-action-test-" + std::to_string(::getpid()) + "-" + name;
}

// Sets environment variables for one test and restores them afterwards.
class ScopedEnv {
 public:
  ScopedEnv() = default;
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second) {
        ::setenv(it->first.c_str(), it->second->c_str(), 1);
      } else {
        ::unsetenv(it->first.c_str());
      }
    }
  }
  void Set(const std::string& name, const std::optional<std::string>& value) {
    const char* old = std::getenv(name.c_str());
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value) {
      ::setenv(name.c_str(), value->c_str(), 1);
    } else {
      ::unsetenv(name.c_str());
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

// The helper's modes (argv: STANDINS_DIR MODE TOKEN [ARG]); each process it starts writes
// "NAME ready" to stdout once it is what it should be, so a test waits on a pipe, not a clock.
//   tree   an "API server" (this process) with VLLM::Worker_TP0, and VLLM::Worker_TP1 that
//          ignores SIGTERM; both retitled like setproctitle (argv and comm), same group
//   gpu    the same, the workers holding 70GiB each on GPUs 0 and 1 of $DEPLOYD_SIM_DIR
//   title  this process, retitled ARG
//   many   ARG processes with this command line
inline constexpr char kTreeHelper[] = R"PY(
import os, signal, sys
sys.path.insert(0, sys.argv[1])
import simhost

def ready(name):
    os.write(1, (name + " ready\n").encode())

def stay():
    while True:
        signal.pause()

def child(title, ignore_term=False, gpus=None):
    if os.fork():
        return
    if ignore_term:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if title:
        simhost.set_process_title(title)
    if gpus is not None:
        simhost.register_gpu_memory(os.getpid(), gpus, 71680)
    ready(title or "child")
    stay()

mode = sys.argv[2]
if mode in ("tree", "gpu"):
    child("VLLM::Worker_TP0", gpus=[0] if mode == "gpu" else None)
    child("VLLM::Worker_TP1", ignore_term=True, gpus=[1] if mode == "gpu" else None)
elif mode == "title":
    simhost.set_process_title(sys.argv[4])
elif mode == "many":
    for _ in range(int(sys.argv[4]) - 1):
        child(None)
ready("leader")
stay()
)PY";

// A started helper: the leader's pid (its own process group) and how many "ready" lines to
// expect.
struct Tree {
  pid_t leader = 0;

  // Ends whatever is left of the tree (only this group, which the test created) and reaps the
  // leader. Safe after the tree was killed.
  void Clean() {
    if (leader <= 0) return;
    ::kill(-leader, SIGKILL);
    int status = 0;
    ::waitpid(leader, &status, 0);
    leader = 0;
  }
  ~Tree() { Clean(); }
};

// Starts the helper in a process group of its own and returns once `ready` processes said so.
inline void StartTree(Tree& tree, const TempDir& dir, const std::vector<std::string>& args,
                      int ready) {
  dir.Write("tree_helper.py", kTreeHelper);
  std::vector<std::string> argv = {"python3", dir.File("tree_helper.py"), StandinsDir()};
  argv.insert(argv.end(), args.begin(), args.end());
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  std::vector<char*> args_c;
  for (const std::string& a : argv) args_c.push_back(const_cast<char*>(a.c_str()));
  args_c.push_back(nullptr);
  int rc = ::posix_spawnp(&tree.leader, "python3", &actions, &attr, args_c.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  REQUIRE(rc == 0);
  std::string seen;
  int lines = 0;
  char buf[256];
  while (lines < ready) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // every writer gone: the helper failed
    for (ssize_t i = 0; i < n; ++i) lines += buf[i] == '\n';
    seen.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  INFO("helper said: " << seen);
  REQUIRE(lines == ready);
}

// The live (not zombie) members of process group `pgid`, by pid.
inline std::vector<ProcessInfo> GroupMembers(pid_t pgid) {
  std::vector<ProcessInfo> members;
  auto table = ProcessTable::Read();
  REQUIRE(table.ok());
  for (const ProcessInfo& p : table->processes()) {
    if (p.stat.pgid == pgid && p.stat.state != 'Z' && p.stat.state != 'X') members.push_back(p);
  }
  return members;
}

inline bool Alive(pid_t pid) {
  auto stat = ReadProcStat(pid);
  return stat && stat->state != 'Z' && stat->state != 'X';
}

// An ActionContext whose lines are collected.
struct Said {
  std::vector<std::string> lines;
  ActionContext ctx;
  Said() {
    ctx.say = [this](std::string_view line) { lines.emplace_back(line); };
  }
  bool Has(const std::string& line) const {
    for (const std::string& l : lines) {
      if (l == line) return true;
    }
    return false;
  }
  bool HasPrefix(const std::string& prefix) const {
    for (const std::string& l : lines) {
      if (l.rfind(prefix, 0) == 0) return true;
    }
    return false;
  }
  std::string All() const {
    std::string text;
    for (const std::string& l : lines) text += l + "\n";
    return text;
  }
};

}  // namespace deployd::testing

#endif  // DEPLOYD_TESTS_ACTION_TEST_HELPERS_H_
