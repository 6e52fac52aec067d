#include "process/spawn.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <string_view>

extern char** environ;

namespace deployd {

namespace {

// What systemd gives a service for that service alone. A child that inherited NOTIFY_SOCKET
// could tell systemd deployd is ready or stopping; one with WATCHDOG_PID would be told apart
// from deployd by nothing but its pid.
constexpr std::array<std::string_view, 10> kServiceManagerOnly = {
    "NOTIFY_SOCKET",  "WATCHDOG_USEC",  "WATCHDOG_PID",  "LISTEN_FDS",       "LISTEN_PID",
    "LISTEN_FDNAMES", "JOURNAL_STREAM", "INVOCATION_ID", "SYSTEMD_EXEC_PID", "MANAGERPID"};

std::string_view KeyOf(std::string_view entry) { return entry.substr(0, entry.find('=')); }

std::string PathOf(const std::vector<std::string>& env) {
  for (const std::string& e : env)
    if (KeyOf(e) == "PATH") return e.substr(5);
  const char* own = ::getenv("PATH");
  return own ? own : "/usr/local/bin:/usr/bin:/bin";
}

// A descriptor of the caller's that is itself 0, 1 or 2 would be closed by the child's other
// dup2s: a copy above them is used instead.
struct Fd {
  int fd = -1;
  bool owned = false;
  ~Fd() {
    if (owned) ::close(fd);
  }
};

Status Prepare(int fd, Fd& out) {
  if (fd < 0) {
    out.fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    out.owned = out.fd >= 0;
  } else if (fd <= 2) {
    out.fd = ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
    out.owned = out.fd >= 0;
  } else {
    out.fd = fd;
  }
  if (out.fd < 0)
    return Status::Error(std::string("cannot prepare descriptors: ") + ::strerror(errno));
  return Status::Ok();
}

}  // namespace

std::string FindOnPath(const std::string& name, const std::string& path_var) {
  if (name.find('/') != std::string::npos) return name;
  size_t start = 0;
  while (start <= path_var.size()) {
    size_t end = path_var.find(':', start);
    if (end == std::string::npos) end = path_var.size();
    std::string dir = end > start ? path_var.substr(start, end - start) : std::string(".");
    std::string candidate = dir + "/" + name;
    struct stat st;
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    start = end + 1;
  }
  return "";
}

std::string FindOnPath(const std::string& name) {
  const char* path = ::getenv("PATH");
  return FindOnPath(name, path ? path : "/usr/local/bin:/usr/bin:/bin");
}

std::vector<std::string> ChildEnvironment(const std::map<std::string, std::string>& overrides) {
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry = *e;
    std::string_view key = KeyOf(entry);
    bool dropped = overrides.count(std::string(key)) > 0;
    for (std::string_view only : kServiceManagerOnly) dropped = dropped || key == only;
    if (!dropped) env.emplace_back(entry);
  }
  for (const auto& [key, value] : overrides) env.push_back(key + "=" + value);
  return env;
}

Result<Spawned> Spawn(const SpawnRequest& request) {
  if (request.argv.empty() || request.argv[0].empty())
    return Status::Error("cannot start '': empty command");
  const std::string& program = request.argv[0];
  std::string executable = FindOnPath(program, PathOf(request.env));
  if (executable.empty()) return Status::Error("cannot start '" + program + "': not found on PATH");

  Fd in, out, err;
  if (Status s = Prepare(request.stdin_fd, in); !s.ok()) return s;
  if (Status s = Prepare(request.stdout_fd, out); !s.ok()) return s;
  if (request.stderr_fd < 0) {
    err.fd = out.fd;
  } else if (Status s = Prepare(request.stderr_fd, err); !s.ok()) {
    return s;
  }

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attr);
  ::posix_spawn_file_actions_adddup2(&actions, in.fd, STDIN_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, out.fd, STDOUT_FILENO);
  ::posix_spawn_file_actions_adddup2(&actions, err.fd, STDERR_FILENO);
  // Nothing of the caller's beyond 0-2: not its sockets, not other children's pipes.
  ::posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  if (!request.cwd.empty()) ::posix_spawn_file_actions_addchdir_np(&actions, request.cwd.c_str());
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  ::posix_spawnattr_setsigdefault(&attr, &all);  // ignored dispositions would survive exec
  ::posix_spawnattr_setsigmask(&attr, &none);
  short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
  if (request.new_session) flags |= POSIX_SPAWN_SETSID;
  ::posix_spawnattr_setflags(&attr, flags);

  std::vector<char*> argv;
  for (const std::string& a : request.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const std::string& e : request.env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  pid_t pid = 0;
  int error = ::posix_spawn(&pid, executable.c_str(), &actions, &attr, argv.data(), envp.data());
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  if (error != 0) {
    std::string where = request.cwd.empty() ? "" : " in " + request.cwd;
    return Status::Error("cannot start '" + program + "'" + where + ": " + ::strerror(error));
  }
  // Not reaped before someone waits for it, so the pid cannot have been reused yet.
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    // Without a pidfd nothing could wait for it as an event: stop it rather than lose it.
    int saved = errno;
    ::kill(request.new_session ? -pid : pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return Status::Error("cannot watch '" + program + "' (pid " + std::to_string(pid) +
                         "): pidfd_open: " + ::strerror(saved));
  }
  return Spawned{pid, pidfd};
}

}  // namespace deployd
