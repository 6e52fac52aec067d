#include "process/supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>

#include "process/supervisor_record.h"

namespace deployd {

namespace {

std::int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Everything the supervisor cannot say through its records goes to the step's log, where an
// operator looking at the step will find it.
void Complain(int log_fd, const std::string& message) {
  std::string line = "deployd supervisor: " + message + "\n";
  if (log_fd < 0) log_fd = STDERR_FILENO;
  (void)!::write(log_fd, line.data(), line.size());
}

// One line on stdout for the daemon; the daemon may be gone already (SIGPIPE is ignored).
void Report(const SupervisorRecord& record) {
  std::string line = record.ToJson() + "\n";
  (void)!::write(STDOUT_FILENO, line.data(), line.size());
}

int Usage() {
  std::fprintf(stderr,
               "usage: deployd --supervise STATUS_FILE LOG_FILE -- PROGRAM [ARG...]\n"
               "(started by deployd for a background step; not meant to be run by hand)\n");
  return 2;
}

}  // namespace

std::vector<std::string> SupervisorCommand(const std::string& deployd_exe,
                                           const std::string& status_file,
                                           const std::string& log_file) {
  return {deployd_exe, std::string(kSuperviseFlag), status_file, log_file, "--"};
}

int SuperviseMain(int argc, char** argv) {
  if (argc < 6 || std::string_view(argv[4]) != "--") return Usage();
  const std::string status_file = argv[2];
  const std::string log_file = argv[3];
  char** program_argv = argv + 5;
  const std::string program = program_argv[0];

  // Outlive whatever stops the daemon; the action gets the default dispositions back.
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) ::signal(sig, SIG_IGN);

  SupervisorRecord record;
  record.supervisor = ProcessIdentity::Of(::getpid()).value_or(ProcessIdentity{});
  record.started_at_ms = NowMs();
  auto fail = [&](const std::string& error, int log_fd) {
    Complain(log_fd, error);
    record.state = SupervisorRecord::State::kFailedToStart;
    record.error = error;
    record.ended_at_ms = NowMs();
    if (Status s = WriteSupervisorRecord(status_file, record); !s.ok())
      Complain(log_fd, s.message());
    Report(record);
    return 1;
  };

  int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (log_fd < 0) return fail("cannot open log " + log_file + ": " + ::strerror(errno), -1);
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  int exec_error[2];
  if (null_fd < 0 || ::pipe2(exec_error, O_CLOEXEC) != 0)
    return fail(std::string("cannot prepare the action: ") + ::strerror(errno), log_fd);

  pid_t pid = ::fork();
  if (pid < 0) return fail("cannot start '" + program + "': " + ::strerror(errno), log_fd);
  if (pid == 0) {
    // The action: a process group of its own, so that stopping it reaches its whole tree.
    ::setpgid(0, 0);
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    // Ignored dispositions survive exec; the action must be stoppable by SIGTERM.
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) ::signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execv(program_argv[0], program_argv);
    int err = errno;
    (void)!::write(exec_error[1], &err, sizeof err);
    ::_exit(127);
  }
  // Also here: whichever of the two runs first, the group exists before anyone signals it.
  ::setpgid(pid, pid);
  ::close(exec_error[1]);
  int err = 0;
  ssize_t n;
  do {
    n = ::read(exec_error[0], &err, sizeof err);  // EOF: exec succeeded (the pipe is CLOEXEC)
  } while (n < 0 && errno == EINTR);
  ::close(exec_error[0]);
  record.action = ProcessIdentity::Of(pid).value_or(ProcessIdentity{pid, 0, CurrentBootId()});
  if (n > 0) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return fail("cannot start '" + program + "': " + ::strerror(err), log_fd);
  }

  record.state = SupervisorRecord::State::kRunning;
  if (Status s = WriteSupervisorRecord(status_file, record); !s.ok()) {
    // Without its status file nobody could ever learn how the action ends: stop it now.
    ::kill(-pid, SIGKILL);
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return fail(s.message(), log_fd);
  }
  Report(record);
  // Let go of the daemon's pipe: its reader may go away at any time from now on.
  ::dup2(null_fd, STDOUT_FILENO);
  ::dup2(log_fd, STDERR_FILENO);
  ::close(null_fd);

  int raw = 0;
  while (::waitpid(pid, &raw, 0) < 0) {
    if (errno != EINTR) {
      Complain(log_fd, std::string("cannot wait for the action: ") + ::strerror(errno));
      return 1;
    }
  }
  record.state = SupervisorRecord::State::kExited;
  record.ended_at_ms = NowMs();
  record.exit = ExitStatus::FromWaitStatus(raw);
  if (Status s = WriteSupervisorRecord(status_file, record); !s.ok()) {
    Complain(log_fd, s.message());
    return 1;
  }
  return 0;
}

}  // namespace deployd
