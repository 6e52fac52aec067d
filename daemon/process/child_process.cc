#include "process/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <memory>

#include "process/spawn.h"
#include "util/log_marks.h"
#include "util/secrets.h"

namespace deployd {

namespace asio = boost::asio;

namespace {

constexpr size_t kMaxLineBytes = 64 * 1024;

}  // namespace

struct ChildProcess::Impl {
  // One of the child's output pipes, and the line it is in the middle of.
  struct Stream {
    explicit Stream(asio::any_io_executor ex) : pipe(ex) {}
    asio::readable_pipe pipe;
    std::array<char, 16384> buffer;
    std::string partial;
    bool eof = false;
    // An async read is outstanding: until its handler runs, `buffer` is the read's (it may
    // already hold data whose handler is queued behind the exit's).
    bool reading = false;
    LineHandler* on_line = nullptr;  // the Impl's on_line or on_stderr_line
  };

  explicit Impl(asio::any_io_executor ex) : exit_watch(ex), out(ex), err(ex), kill_timer(ex) {
    out.on_line = &on_line;
    err.on_line = &on_stderr_line;
  }
  ~Impl() {
    // Never kill on destruction; stopping is an explicit Terminate(). The pidfd closes with
    // exit_watch; a child not reaped by then is reaped by nobody until deployd exits, which
    // happens only when the daemon itself goes.
    if (log_fd >= 0) ::close(log_fd);
  }

  asio::posix::stream_descriptor exit_watch;  // the child's pidfd: readable once it has exited
  Stream out;  // stdout, and stderr too unless on_stderr_line was given
  Stream err;  // stderr when on_stderr_line was given
  asio::steady_timer kill_timer;
  std::deque<std::string> tail;
  LineHandler on_line;
  LineHandler on_stderr_line;
  ExitHandler on_exit;
  std::optional<ExitStatus> exit_status;  // reaped; reported to on_exit once the output is in
  std::function<std::optional<std::string>(std::string_view)> rewrite_line;
  std::string log_path;
  std::unique_ptr<LogMarkWriter> log_marks;  // when its lines were written (util/log_marks.h)
  int log_fd = -1;
  std::uint64_t log_bytes = 0;
  std::uint64_t log_cap = 0;
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
      log_marks->Rotated();
      OpenLog();
    }
    log_marks->BeforeLine(log_fd);
    std::string out(line);
    out += '\n';
    if (::write(log_fd, out.data(), out.size()) > 0) log_bytes += out.size();
  }

  void EmitLine(const Stream& from, std::string_view raw) {
    if (rewrite_line) {
      // Empty pieces are dropped, as empty lines are.
      std::optional<std::string> rewritten = rewrite_line(raw);
      if (!rewritten) return;
      for (size_t pos = 0; pos <= rewritten->size();) {
        size_t end = std::min(rewritten->find('\n', pos), rewritten->size());
        if (end > pos) EmitRewritten(from, std::string_view(*rewritten).substr(pos, end - pos));
        pos = end + 1;
      }
      return;
    }
    EmitRewritten(from, raw);
  }

  void EmitRewritten(const Stream& from, std::string_view raw) {
    std::string redacted;
    std::string_view line = raw;
    if (!redactor.empty()) line = redacted = redactor.Redact(raw);
    WriteLog(line);
    tail.emplace_back(line);
    if (tail.size() > kTailLines) tail.pop_front();
    if (*from.on_line) (*from.on_line)(line);
  }

  // Splits on '\n' and on '\r' (progress bars redraw with '\r'); empty pieces are dropped.
  void Consume(Stream& from, std::string_view data) {
    std::string& partial = from.partial;
    for (char c : data) {
      if (c == '\n' || c == '\r') {
        if (!partial.empty()) EmitLine(from, partial);
        partial.clear();
      } else {
        partial += c;
        if (partial.size() >= kMaxLineBytes) {
          EmitLine(from, partial);
          partial.clear();
        }
      }
    }
  }

  void FlushPartial(Stream& from) {
    if (!from.partial.empty()) EmitLine(from, from.partial);
    from.partial.clear();
  }

  // Reads what the pipe holds right now without waiting: at exit, everything the child wrote
  // is already in the pipe, even when a grandchild keeps the write end open.
  // Plain read(2): Asio's synchronous read_some does not know of an O_NONBLOCK set behind its
  // back and poll()s until data comes, which blocks the daemon's one thread for as long as a
  // grandchild holds the pipe open without writing.
  void DrainNow(Stream& from) {
    if (from.eof || !from.pipe.is_open()) return;
    int fd = from.pipe.native_handle();
    ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
    for (;;) {
      ssize_t n = ::read(fd, from.buffer.data(), from.buffer.size());
      if (n > 0) {
        Consume(from, std::string_view(from.buffer.data(), static_cast<size_t>(n)));
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      from.eof = true;
      FlushPartial(from);
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
  SpawnRequest request;
  request.env = ChildEnvironment(options.env);
  request.cwd = options.cwd;
  request.argv = options.argv;
  if (!options.wrapper.empty()) {
    // Errors name the program, not the wrapper: resolved here, on the child's PATH.
    std::string path_var;
    for (const std::string& e : request.env)
      if (e.starts_with("PATH=")) path_var = e.substr(5);
    std::string executable = FindOnPath(program, path_var);
    if (executable.empty())
      return Status::Error("cannot start '" + program + "': not found on PATH");
    request.argv = options.wrapper;
    request.argv.push_back(executable);
    request.argv.insert(request.argv.end(), options.argv.begin() + 1, options.argv.end());
  }

  auto child = std::shared_ptr<ChildProcess>(new ChildProcess());
  child->impl_ = std::make_unique<Impl>(ex);
  Impl& impl = *child->impl_;
  impl.on_line = std::move(on_line);
  impl.on_exit = std::move(on_exit);
  impl.on_stderr_line = options.on_stderr_line;
  impl.rewrite_line = options.rewrite_line;
  impl.log_path = options.log_path;
  if (!options.redact.empty()) impl.redactor = Redactor(options.redact);
  impl.log_cap = options.log_cap_bytes;

  // The child's stdout and stderr: one pipe, so that their lines keep their order, unless
  // the caller asked to tell them apart.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) < 0)
    return Status::Error(std::string("cannot create a pipe: ") + ::strerror(errno));
  int err_fds[2] = {-1, -1};
  if (options.on_stderr_line && ::pipe2(err_fds, O_CLOEXEC) < 0) {
    int error = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::Error(std::string("cannot create a pipe: ") + ::strerror(error));
  }
  if (!options.log_path.empty()) {
    impl.log_marks = std::make_unique<LogMarkWriter>(options.log_path);
    impl.OpenLog();
  }

  request.stdout_fd = fds[1];
  request.stderr_fd = err_fds[1] >= 0 ? err_fds[1] : fds[1];
  Result<Spawned> spawned = Spawn(request);
  ::close(fds[1]);
  if (err_fds[1] >= 0) ::close(err_fds[1]);
  if (!spawned.ok()) {
    ::close(fds[0]);
    if (err_fds[0] >= 0) ::close(err_fds[0]);
    return spawned.status();
  }
  child->pid_ = spawned->pid;
  impl.exit_watch.assign(spawned->pidfd);

  impl.out.pipe.assign(fds[0]);
  ReadOutput(child, false);
  if (err_fds[0] >= 0) {
    impl.err.pipe.assign(err_fds[0]);
    ReadOutput(child, true);
  }

  impl.exit_watch.async_wait(
      asio::posix::stream_descriptor::wait_read, [child](boost::system::error_code) {
        Impl& impl = *child->impl_;
        int wait_status = 0;
        pid_t reaped;
        do {
          reaped = ::waitpid(child->pid_, &wait_status, 0);
        } while (reaped < 0 && errno == EINTR);
        // Not reapable only if SIGCHLD were ignored: reported, not hidden.
        ExitStatus status =
            reaped == child->pid_ ? ExitStatus::FromWaitStatus(wait_status) : ExitStatus{255, 0};
        child->exited_ = true;
        impl.exit_status = status;
        impl.exit_watch.close();
        // A read whose data is already in hand completes as it is; one still waiting ends now.
        for (Impl::Stream* from : {&impl.out, &impl.err})
          if (from->reading) from->pipe.cancel();
        ReportExit(child);
      });
  return child;
}

// Once no read of the child's output is outstanding: what is left in the pipes is read, then
// the exit is reported, then reading goes on for what the child's children may still write.
void ChildProcess::ReportExit(std::shared_ptr<ChildProcess> self) {
  Impl& impl = *self->impl_;
  if (!impl.exit_status || impl.out.reading || impl.err.reading) return;
  impl.DrainNow(impl.out);
  impl.DrainNow(impl.err);
  ExitStatus status = *impl.exit_status;
  impl.exit_status.reset();
  if (impl.on_exit) {
    auto handler = std::move(impl.on_exit);
    handler(status);
  }
  for (bool from_stderr : {false, true}) {
    Impl::Stream& from = from_stderr ? impl.err : impl.out;
    if (!from.eof && from.pipe.is_open()) ReadOutput(self, from_stderr);
  }
}

ChildProcess::~ChildProcess() = default;

// Output is read as it arrives; each line is matched the moment it is complete. The pending
// operation's handler keeps the object alive until EOF.
void ChildProcess::ReadOutput(std::shared_ptr<ChildProcess> self, bool from_stderr) {
  Impl::Stream& from = from_stderr ? self->impl_->err : self->impl_->out;
  from.reading = true;
  from.pipe.async_read_some(asio::buffer(from.buffer), [self, from_stderr](auto ec, size_t n) {
    Impl& impl = *self->impl_;
    Impl::Stream& from = from_stderr ? impl.err : impl.out;
    from.reading = false;
    if (ec == asio::error::operation_aborted && impl.exit_status) {
      return ReportExit(self);  // cancelled by the exit: the rest is read there
    }
    if (ec) {
      if (!from.eof) {
        from.eof = true;
        impl.FlushPartial(from);
      }
      return ReportExit(self);
    }
    impl.Consume(from, std::string_view(from.buffer.data(), n));
    if (impl.exit_status) return ReportExit(self);  // reads on once the exit is reported
    ReadOutput(self, from_stderr);
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
