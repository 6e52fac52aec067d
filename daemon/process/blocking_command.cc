#include "process/blocking_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <string_view>

#include "process/spawn.h"
#include "util/units.h"

namespace deployd {
namespace {

constexpr size_t kMaxCapture = 4 << 20;

std::string FirstLine(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (line.find_first_not_of(" \t\r") != std::string::npos) return line;
    pos = end + 1;
  }
  return "";
}

// Without the blanks and carriage returns around it.
std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return std::string(s);
}

struct Pipe {
  int read_fd = -1;
  int write_fd = -1;
  ~Pipe() {
    if (read_fd >= 0) ::close(read_fd);
    if (write_fd >= 0) ::close(write_fd);
  }
  bool Open() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    read_fd = fds[0];
    write_fd = fds[1];
    return true;
  }
  void CloseWrite() {
    ::close(write_fd);
    write_fd = -1;
  }
};

// Reads both pipes until both are at end of file or the deadline passes; false on the deadline.
bool Drain(Pipe& out_pipe, Pipe& err_pipe, CommandOutput& output,
           std::chrono::steady_clock::time_point deadline) {
  pollfd fds[2] = {{out_pipe.read_fd, POLLIN, 0}, {err_pipe.read_fd, POLLIN, 0}};
  std::string* sinks[2] = {&output.out, &output.err};
  int open = 2;
  while (open > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    int ready = ::poll(fds, 2, static_cast<int>(std::min<long long>(left.count(), INT_MAX)));
    if (ready < 0 && errno != EINTR) return false;
    if (ready <= 0) continue;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      char buf[8192];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;  // poll ignores negative descriptors
        --open;
        continue;
      }
      if (sinks[i]->size() < kMaxCapture) sinks[i]->append(buf, static_cast<size_t>(n));
    }
  }
  return true;
}

}  // namespace

std::string CommandOutput::Reason() const {
  if (std::string line = FirstLine(err); !line.empty()) return line;
  if (std::string line = FirstLine(out); !line.empty()) return line;
  return exit.ToString();
}

Result<CommandOutput> RunBlocking(const std::vector<std::string>& argv, Duration timeout) {
  if (argv.empty()) return Status::Error("empty command");
  const std::string& program = argv[0];
  Pipe out_pipe, err_pipe;
  if (!out_pipe.Open() || !err_pipe.Open()) {
    return Status::Error(std::string("pipe: ") + std::strerror(errno));
  }
  SpawnRequest request;
  request.argv = argv;
  request.env = ChildEnvironment({});
  request.new_session = false;  // stopping the caller's group stops this command too
  request.stdout_fd = out_pipe.write_fd;
  request.stderr_fd = err_pipe.write_fd;
  std::string path_var;
  for (const std::string& e : request.env)
    if (e.starts_with("PATH=")) path_var = e.substr(5);
  if (FindOnPath(program, path_var).empty()) {
    out_pipe.CloseWrite();
    err_pipe.CloseWrite();
    return Status::Error("cannot start '" + program + "': No such file or directory");
  }
  Result<Spawned> spawned = Spawn(request);
  out_pipe.CloseWrite();
  err_pipe.CloseWrite();
  if (!spawned.ok()) return spawned.status();
  ::close(spawned->pidfd);
  const pid_t pid = spawned->pid;

  CommandOutput output;
  // A grandchild that keeps a pipe open (a daemon the tool started without closing its
  // descriptors) would hold us until the deadline; the tools used here close theirs.
  bool finished = Drain(out_pipe, err_pipe, output, std::chrono::steady_clock::now() + timeout);
  if (!finished) ::kill(pid, SIGKILL);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!finished) {
    return Status::Error(program + ": no answer within " + FormatDuration(timeout) + ", killed");
  }
  output.exit = ExitStatus::FromWaitStatus(wstatus);
  return output;
}

CommandRunner BlockingCommandRunner(Duration timeout) {
  return [timeout](const std::vector<std::string>& argv) -> Result<std::string> {
    if (argv.empty()) return Status::Error("empty command");
    Result<CommandOutput> run = RunBlocking(argv, timeout);
    if (!run.ok()) return run.status();
    if (!run->ok()) {
      // nvidia-smi says why on stdout ("NVIDIA-SMI has failed because …").
      std::string first_line = run->out.substr(0, run->out.find('\n'));
      return Status::Error(argv[0] + ": " + run->exit.ToString() +
                           (first_line.empty() ? "" : ": " + Trim(first_line)));
    }
    return std::move(run->out);
  };
}

}  // namespace deployd
