#include "process/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <string>

using namespace deployd;

namespace {

struct Finished {
  int status = 0;
  std::string out;
};

// Runs the request with stdout on a pipe; waits for the pidfd to be readable (the exit as an
// event), then reaps and reads what the child printed.
Finished Run(SpawnRequest request) {
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  request.stdout_fd = pipe_fds[1];
  Result<Spawned> spawned = Spawn(request);
  ::close(pipe_fds[1]);
  REQUIRE(spawned.ok());
  pollfd p{spawned->pidfd, POLLIN, 0};
  REQUIRE(::poll(&p, 1, 30'000) == 1);
  Finished f;
  REQUIRE(::waitpid(spawned->pid, &f.status, 0) == spawned->pid);
  ::close(spawned->pidfd);
  char buf[4096];
  ssize_t n;
  while ((n = ::read(pipe_fds[0], buf, sizeof buf)) > 0) f.out.append(buf, n);
  ::close(pipe_fds[0]);
  return f;
}

SpawnRequest Sh(const std::string& script) {
  SpawnRequest r;
  r.argv = {"sh", "-c", script};
  r.env = ChildEnvironment({});
  return r;
}

}  // namespace

TEST_CASE("spawn: a program that cannot start is named as the plan wrote it") {
  SpawnRequest r;
  r.env = ChildEnvironment({{"PATH", "/nonexistent"}});
  r.argv = {"no-such-tool-here"};
  Result<Spawned> s = Spawn(r);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message() == "cannot start 'no-such-tool-here': not found on PATH");
  r.argv = {"/nonexistent/tool"};
  s = Spawn(r);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message() == "cannot start '/nonexistent/tool': No such file or directory");
  char path[] = "/tmp/deployd-spawn-XXXXXX";
  int fd = ::mkstemp(path);  // mode 0600: not executable
  REQUIRE(fd >= 0);
  ::close(fd);
  r.argv = {path};
  s = Spawn(r);
  ::unlink(path);
  REQUIRE_FALSE(s.ok());
  CHECK(s.status().message() == "cannot start '" + std::string(path) + "': Permission denied");
}

TEST_CASE("spawn: the child leads a session and process group of its own") {
  Finished f = Run(Sh("echo $$ $(ps -o sid= -p $$) $(ps -o pgid= -p $$)"));
  REQUIRE(WIFEXITED(f.status));
  int pid = 0, sid = 0, pgid = 0;
  REQUIRE(std::sscanf(f.out.c_str(), "%d %d %d", &pid, &sid, &pgid) == 3);
  CHECK(sid == pid);
  CHECK(pgid == pid);
}

TEST_CASE("spawn: no descriptor of the caller's beyond 0-2 reaches the child") {
  int leaked = ::open("/dev/null", O_RDONLY);  // not close-on-exec, as Asio's sockets are not
  REQUIRE(leaked > 2);
  Finished f = Run(Sh("ls /proc/self/fd"));
  ::close(leaked);
  CHECK(f.out == "0\n1\n2\n3\n");  // 3: the directory ls is reading
}

TEST_CASE("spawn: the environment given, without what the service manager gave deployd") {
  ::setenv("NOTIFY_SOCKET", "/run/systemd/notify", 1);
  ::setenv("WATCHDOG_USEC", "30000000", 1);
  ::setenv("JOURNAL_STREAM", "9:1234", 1);
  SpawnRequest r = Sh("env");
  r.env = ChildEnvironment({{"HOME", "/nowhere"}, {"STEP_VAR", "x y"}});
  ::unsetenv("NOTIFY_SOCKET");
  ::unsetenv("WATCHDOG_USEC");
  ::unsetenv("JOURNAL_STREAM");
  Finished f = Run(r);
  CHECK(f.out.find("STEP_VAR=x y\n") != std::string::npos);
  CHECK(f.out.find("HOME=/nowhere\n") != std::string::npos);
  CHECK(f.out.find("PATH=") != std::string::npos);
  CHECK(f.out.find("NOTIFY_SOCKET") == std::string::npos);
  CHECK(f.out.find("WATCHDOG_USEC") == std::string::npos);
  CHECK(f.out.find("JOURNAL_STREAM") == std::string::npos);
}

TEST_CASE("spawn: default signal dispositions and mask, whatever the caller's") {
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  struct sigaction old {};
  ::sigaction(SIGTERM, &ignore, &old);
  sigset_t block, old_mask;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  ::sigprocmask(SIG_BLOCK, &block, &old_mask);
  Finished f = Run(Sh("kill -TERM $$; sleep 5"));
  ::sigprocmask(SIG_SETMASK, &old_mask, nullptr);
  ::sigaction(SIGTERM, &old, nullptr);
  REQUIRE(WIFSIGNALED(f.status));
  CHECK(WTERMSIG(f.status) == SIGTERM);
}

TEST_CASE("spawn: working directory and stdin") {
  SpawnRequest r = Sh("pwd; cat");
  r.cwd = "/tmp";
  Finished f = Run(r);  // stdin is /dev/null: cat ends at once
  CHECK(f.out == "/tmp\n");
}
