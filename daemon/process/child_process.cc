// The one translation unit that includes Boost.Process v2 (it is the most expensive header set
// of the project to compile). Workarounds for Boost 1.81, see notes/build-facts.md §3:
// children would inherit every descriptor without CloseInheritedFds, there is no setsid
// initializer, and the environment initializer does not link header-only (EnvInit below).
#include "process/child_process.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/read.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/process/v2/process.hpp>
#include <boost/process/v2/start_dir.hpp>
#include <boost/process/v2/stdio.hpp>
#include <deque>

#include "util/secrets.h"

extern char** environ;

namespace deployd {

namespace asio = boost::asio;
namespace bp2 = boost::process::v2;

namespace {

constexpr size_t kMaxLineBytes = 64 * 1024;

// Runs in the child between fork and exec, after the stdio initializer has dup'ed its fds.
struct ChildSetup {
  template <typename Launcher>
  bp2::error_code on_exec_setup(Launcher&, const bp2::filesystem::path&, const char* const*) {
    // Own session and process group: the whole tree can be signalled as one, and it does not
    // share the daemon's controlling terminal.
    if (::setsid() < 0) return bp2::error_code(errno, bp2::system_category());
    // Boost 1.81's close_handles skips descriptors below its error pipe: mark all above
    // stderr close-on-exec here instead.
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
      return bp2::error_code(errno, bp2::system_category());
    // The daemon ignores SIGPIPE; an ignored disposition would survive exec.
    ::signal(SIGPIPE, SIG_DFL);
    return {};
  }
};

// Sets the child's environment (the launcher's own initializer does not link header-only).
struct EnvInit {
  const char* const* envp;
  template <typename Launcher>
  bp2::error_code on_setup(Launcher& launcher, const bp2::filesystem::path&, const char* const*) {
    launcher.env = envp;
    return {};
  }
};

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

}  // namespace

struct ChildProcess::Impl {
  explicit Impl(asio::any_io_executor ex) : proc(ex), pipe(ex), kill_timer(ex) {}
  ~Impl() {
    // Never kill on destruction (a background action outlives the daemon); stopping is an
    // explicit Terminate().
    if (proc.is_open()) proc.detach();
    if (log_fd >= 0) ::close(log_fd);
  }

  bp2::process proc;
  asio::readable_pipe pipe;
  asio::steady_timer kill_timer;
  std::array<char, 16384> buffer;
  std::string partial;
  std::deque<std::string> tail;
  LineHandler on_line;
  ExitHandler on_exit;
  std::string log_path;
  int log_fd = -1;
  std::uint64_t log_bytes = 0;
  std::uint64_t log_cap = 0;
  bool eof = false;
  Redactor redactor;

  void OpenLog() {
    log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    struct stat st;
    log_bytes = (log_fd >= 0 && ::fstat(log_fd, &st) == 0) ? st.st_size : 0;
  }

  void WriteLog(std::string_view line) {
    if (log_fd < 0) return;
    if (log_cap && log_bytes + line.size() + 1 > log_cap) {
      // Keep the newest output: the tail is what explains a failure.
      ::close(log_fd);
      ::rename(log_path.c_str(), (log_path + ".1").c_str());
      OpenLog();
    }
    std::string out(line);
    out += '\n';
    if (::write(log_fd, out.data(), out.size()) > 0) log_bytes += out.size();
  }

  void EmitLine(std::string_view raw) {
    std::string redacted;
    std::string_view line = raw;
    if (!redactor.empty()) line = redacted = redactor.Redact(raw);
    WriteLog(line);
    tail.emplace_back(line);
    if (tail.size() > kTailLines) tail.pop_front();
    if (on_line) on_line(line);
  }

  // Splits on '\n' and on '\r' (progress bars redraw with '\r'); empty pieces are dropped.
  void Consume(std::string_view data) {
    for (char c : data) {
      if (c == '\n' || c == '\r') {
        if (!partial.empty()) EmitLine(partial);
        partial.clear();
      } else {
        partial += c;
        if (partial.size() >= kMaxLineBytes) {
          EmitLine(partial);
          partial.clear();
        }
      }
    }
  }

  void FlushPartial() {
    if (!partial.empty()) EmitLine(partial);
    partial.clear();
  }

  // Reads what the pipe holds right now without waiting: at exit, everything the child wrote
  // is already in the pipe, even when a grandchild keeps the write end open.
  // Plain read(2): Asio's synchronous read_some does not know of an O_NONBLOCK set behind its
  // back and poll()s until data comes, which blocks the daemon's one thread for as long as a
  // grandchild holds the pipe open without writing.
  void DrainNow() {
    if (eof || !pipe.is_open()) return;
    int fd = pipe.native_handle();
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (;;) {
      ssize_t n = ::read(fd, buffer.data(), buffer.size());
      if (n > 0) {
        Consume(std::string_view(buffer.data(), static_cast<size_t>(n)));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      eof = true;
      FlushPartial();
      return;
    }
  }
};

Result<std::shared_ptr<ChildProcess>> ChildProcess::Start(asio::any_io_executor ex,
                                                          const SpawnOptions& options,
                                                          LineHandler on_line,
                                                          ExitHandler on_exit) {
  if (options.argv.empty() || options.argv[0].empty())
    return Status::Error("cannot start a process: empty command");
  const std::string& program = options.argv[0];

  // The child's environment: the daemon's, with the overrides replacing same-named entries.
  std::vector<std::string> env_strings;
  std::string path_var = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  for (char** e = environ; e && *e; ++e) {
    std::string_view entry(*e);
    std::string key(entry.substr(0, entry.find('=')));
    if (options.env.count(key)) continue;
    if (key == "PATH") path_var = std::string(entry.substr(5));
    env_strings.emplace_back(entry);
  }
  for (const auto& [key, value] : options.env) {
    env_strings.push_back(key + "=" + value);
    if (key == "PATH") path_var = value;
  }
  std::vector<const char*> envp;
  for (const auto& s : env_strings) envp.push_back(s.c_str());
  envp.push_back(nullptr);

  std::string executable = FindOnPath(program, path_var);
  if (executable.empty()) return Status::Error("cannot start '" + program + "': not found on PATH");

  auto child = std::shared_ptr<ChildProcess>(new ChildProcess());
  child->impl_ = std::make_unique<Impl>(ex);
  Impl& impl = *child->impl_;
  impl.on_line = std::move(on_line);
  impl.on_exit = std::move(on_exit);
  impl.log_path = options.log_path;
  if (!options.redact.empty()) impl.redactor = Redactor(options.redact);
  impl.log_cap = options.log_cap_bytes;

  // The child's stdout and stderr: one pipe, so that their lines keep their order.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0)
    return Status::Error(std::string("cannot create a pipe: ") + ::strerror(errno));
  int read_fd = fds[0];
  int out_fd = fds[1];
  if (!options.log_path.empty()) impl.OpenLog();

  std::vector<std::string> args(options.argv.begin() + 1, options.argv.end());
  if (!options.wrapper.empty()) {
    args.insert(args.begin(), executable);
    args.insert(args.begin(), options.wrapper.begin() + 1, options.wrapper.end());
    executable = options.wrapper.front();
  }
  try {
    if (options.cwd.empty()) {
      impl.proc = bp2::process(ex, executable, args, bp2::process_stdio{nullptr, out_fd, out_fd},
                               ChildSetup{}, EnvInit{envp.data()});
    } else {
      impl.proc =
          bp2::process(ex, executable, args, bp2::process_stdio{nullptr, out_fd, out_fd},
                       bp2::process_start_dir(options.cwd), ChildSetup{}, EnvInit{envp.data()});
    }
  } catch (const std::exception& e) {
    ::close(out_fd);
    ::close(read_fd);
    std::string why = e.what();
    if (auto colon = why.find(": "); colon != std::string::npos) why = why.substr(colon + 2);
    if (auto bracket = why.rfind(" ["); bracket != std::string::npos) why.resize(bracket);
    std::string where = options.cwd.empty() ? "" : " in " + options.cwd;
    return Status::Error("cannot start '" + program + "'" + where + ": " + why);
  }
  ::close(out_fd);
  child->pid_ = impl.proc.id();

  impl.pipe.assign(read_fd);
  ReadOutput(child);

  impl.proc.async_wait([child](boost::system::error_code ec, int) {
    Impl& impl = *child->impl_;
    ExitStatus status;
    if (ec) {
      status.code = 255;  // cannot happen unless SIGCHLD is ignored; reported, not hidden
    } else {
      status = ExitStatus::FromWaitStatus(impl.proc.native_exit_code());
    }
    child->exited_ = true;
    impl.DrainNow();
    if (impl.on_exit) {
      auto handler = std::move(impl.on_exit);
      handler(status);
    }
  });
  return child;
}

ChildProcess::~ChildProcess() = default;

// Output is read as it arrives; each line is matched the moment it is complete. The pending
// operation's handler keeps the object alive until EOF.
void ChildProcess::ReadOutput(std::shared_ptr<ChildProcess> self) {
  Impl& impl = *self->impl_;
  impl.pipe.async_read_some(asio::buffer(impl.buffer), [self](auto ec, size_t n) {
    Impl& impl = *self->impl_;
    if (ec) {
      if (!impl.eof) {
        impl.eof = true;
        impl.FlushPartial();
      }
      return;
    }
    impl.Consume(std::string_view(impl.buffer.data(), n));
    ReadOutput(self);
  });
}

void ChildProcess::Signal(int sig) {
  if (pid_ > 0) ::kill(-pid_, sig);
}

void ChildProcess::Terminate(Duration grace) {
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGTERM);
  impl_->kill_timer.expires_after(grace);
  impl_->kill_timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec) return;
    // The group outlives its leader when a grandchild ignores SIGTERM.
    if (::kill(-self->pid_, 0) == 0) ::kill(-self->pid_, SIGKILL);
  });
}

std::vector<std::string> ChildProcess::Tail() const {
  return {impl_->tail.begin(), impl_->tail.end()};
}

}  // namespace deployd
