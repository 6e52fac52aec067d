#include "process/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

#include "process/exit_status.h"
#include "process/process_identity.h"
#include "process/process_tree.h"
#include "process/spawn.h"
#include "process/supervisor_record.h"
#include "util/clock.h"
#include "util/log_marks.h"
#include "util/secrets.h"

extern char** environ;

namespace deployd {

namespace {

using Clock = std::chrono::steady_clock;

// Lines longer than this are cut (a config dump on one line must not grow without bound).
constexpr size_t kMaxLineBytes = 64 * 1024;

int Usage() {
  std::fprintf(stderr,
               "usage: deployd --supervise [--grace MS] [--log-cap BYTES] [--redact NAME]... "
               "[--attempt N/M] STATUS_FILE LOG_FILE -- PROGRAM [ARG...]\n"
               "(started by deployd for each attempt of a step; not meant to be run by hand)\n");
  return 2;
}

// The action's output on its way to the step's log: whole lines, redacted, the log rotated
// once past its cap (the newest output is what explains a failure). What the log cannot take
// (a full disk) is counted for the record, and the log says so where the gap is once it takes
// lines again.
class OutputRelay {
 public:
  OutputRelay(std::string path, std::uint64_t cap, Redactor redactor, size_t longest_secret)
      : path_(std::move(path)),
        marks_(path_),
        cap_(cap),
        redactor_(std::move(redactor)),
        keep_back_(longest_secret ? longest_secret - 1 : 0) {}
  ~OutputRelay() {
    if (fd_ >= 0) ::close(fd_);
  }

  bool Open() {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    struct stat st;
    bytes_ = fd_ >= 0 && ::fstat(fd_, &st) == 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
    return fd_ >= 0;
  }
  int fd() const { return fd_; }

  void Feed(std::string_view data) {
    partial_.append(data);
    size_t start = 0;
    for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos; start = nl + 1)
      Emit(std::string_view(partial_).substr(start, nl - start));
    partial_.erase(0, start);
    // A line too long is cut; what a secret split by the cut could leave visible is kept back
    // for the next piece, where the whole secret is seen.
    while (partial_.size() > kMaxLineBytes) {
      size_t cut = kMaxLineBytes - keep_back_;
      Emit(std::string_view(partial_).substr(0, cut));
      partial_.erase(0, cut);
    }
  }

  void Finish() {
    if (!partial_.empty()) Emit(partial_);
    partial_.clear();
  }

  // A line of the supervisor's own, for the operator reading the step's log.
  void Say(const std::string& message) { Write("deployd supervisor: " + message); }

  // The attempt's output begins here (a mark beside the log: util/log_marks.h).
  void AttemptStarts(int attempt, int of, std::int64_t at_ms) {
    marks_.AttemptStarts(fd_, attempt, of, at_ms);
  }

  // What the log could not take, for the record.
  void Report(SupervisorRecord& record) const {
    record.log_lost_lines = lost_lines_;
    record.log_lost_bytes = lost_bytes_;
    record.log_error = lost_lines_ ? ::strerror(lost_errno_) : "";
  }

 private:
  void Emit(std::string_view raw) {
    Write(redactor_.empty() ? std::string(raw) : redactor_.Redact(raw));
  }

  void Write(std::string line) {
    line += '\n';
    if (fd_ < 0) return Lost(line.size(), EBADF);
    if (cap_ && bytes_ + line.size() > cap_) {
      ::close(fd_);
      ::rename(path_.c_str(), (path_ + ".1").c_str());
      marks_.Rotated();
      if (!Open()) return Lost(line.size(), errno);
    }
    marks_.BeforeLine(fd_);
    if (gap_lines_ > 0) {
      // The first line the log takes again says what is missing before it.
      std::string gap =
          std::string(cut_ ? "\n" : "") + "deployd supervisor: " + std::to_string(gap_lines_) +
          " lines (" + std::to_string(gap_bytes_) +
          " bytes) of output could not be written here: " + ::strerror(lost_errno_) + "\n";
      if (Append(gap) != gap.size()) return Lost(line.size(), errno);
      gap_lines_ = gap_bytes_ = 0;
    }
    size_t done = Append(line);
    // A full disk: the record still says how the action ended, and how much output is missing.
    if (done < line.size()) Lost(line.size() - done, errno, done > 0);
  }

  // Writes what it can of `data`; returns how much.
  size_t Append(const std::string& data) {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fd_, data.data() + done, data.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    bytes_ += done;
    if (done > 0) cut_ = false;
    return done;
  }

  void Lost(size_t bytes, int error, bool cut = false) {
    if (lost_lines_ == 0) lost_errno_ = error ? error : EIO;
    ++lost_lines_;
    ++gap_lines_;
    lost_bytes_ += bytes;
    gap_bytes_ += bytes;
    cut_ = cut_ || cut;
  }

  std::string path_;
  LogMarkWriter marks_;
  std::uint64_t cap_;
  Redactor redactor_;
  size_t keep_back_;
  int fd_ = -1;
  std::uint64_t bytes_ = 0;
  std::string partial_;
  std::uint64_t lost_lines_ = 0, lost_bytes_ = 0;  // in all, for the record
  std::uint64_t gap_lines_ = 0, gap_bytes_ = 0;    // since the log last took a line
  int lost_errno_ = 0;
  bool cut_ = false;  // the log ends inside a line that was cut short
};

std::vector<ProcessNote> Notes(const std::vector<ProcStat>& processes) {
  std::vector<ProcessNote> notes;
  for (const ProcStat& p : processes) notes.push_back({p.pid, p.comm, p.state});
  return notes;
}

// One attempt, from the start of its action until every process of it is gone.
class Supervision {
 public:
  Supervision(SupervisorOptions options, OutputRelay& relay, pid_t action, int output)
      : options_(std::move(options)), relay_(relay), action_(action), output_(output) {}

  // REQUIRES: SIGCHLD and SIGTERM are blocked; `signals` is a signalfd for both.
  void Run(int signals, SupervisorRecord& record) {
    for (;;) {
      pollfd fds[2] = {{signals, POLLIN, 0}, {output_, POLLIN, 0}};
      int n = ::poll(fds, output_ >= 0 ? 2 : 1, Timeout());
      if (n < 0 && errno != EINTR) break;
      if (output_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) ReadOutput();
      if (fds[0].revents & POLLIN) {
        signalfd_siginfo info;
        while (::read(signals, &info, sizeof info) == sizeof info) {
          if (info.ssi_signo == SIGTERM && phase_ == Phase::kRunning) {
            record.stopped = true;
            relay_.Say("stopping the attempt: SIGTERM to pid " + std::to_string(action_) +
                       " and what it started; SIGKILL after " + FormatMs(options_.grace));
            StartStop();
          }
        }
      }
      // As a subreaper, no child left means no descendant left: whatever the attempt started
      // and orphaned came back here. Only then is /proc worth reading.
      const bool children_left = Reap();
      if (exit_ && phase_ == Phase::kRunning && children_left) StopLeftovers(record);
      if (Clock::now() >= deadline_) OnDeadline(record);
      if (exit_ && !children_left) break;
      if (phase_ == Phase::kGivenUp) break;
    }
    while (output_ >= 0) ReadOutput();  // every writer is gone: the rest, up to EOF
    relay_.Finish();
    record.exit = exit_.value_or(ExitStatus{0, SIGKILL});
  }

 private:
  enum class Phase { kRunning, kTerm, kKill, kGivenUp };

  static std::string FormatMs(std::chrono::milliseconds d) {
    return d.count() % 1000 ? std::to_string(d.count()) + "ms"
                            : std::to_string(d.count() / 1000) + "s";
  }

  int Timeout() const {
    if (phase_ == Phase::kRunning) return -1;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now());
    return static_cast<int>(std::max<std::int64_t>(0, left.count()) + 1);
  }

  void ReadOutput() {
    char buffer[65536];
    ssize_t n = ::read(output_, buffer, sizeof buffer);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      if (errno == EAGAIN && exit_) {
        // Only the final drain reads without poll: nothing more can come once all are gone.
        ::close(output_);
        output_ = -1;
      }
      return;
    }
    if (n <= 0) {
      ::close(output_);
      output_ = -1;
      return;
    }
    relay_.Feed(std::string_view(buffer, static_cast<size_t>(n)));
  }

  // Reaps every child that has ended: the action, and the orphans that came to this
  // subreaper. True while some child is left.
  bool Reap() {
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid == 0) return true;
      if (pid < 0) return errno == EINTR;
      if (pid == action_) exit_ = ExitStatus::FromWaitStatus(status);
    }
  }

  void SignalAll(int sig) {
    ::kill(-action_, sig);  // the action's group first: its usual way to be told
    for (const ProcStat& p : Descendants(::getpid())) {
      SignalIfSame(p, sig);
      if (sig == SIGTERM) SignalIfSame(p, SIGCONT);  // a stopped process cannot act on it
    }
  }

  void StartStop() {
    phase_ = Phase::kTerm;
    SignalAll(SIGTERM);
    deadline_ = Clock::now() + options_.grace;
  }

  void StopLeftovers(SupervisorRecord& record) {
    std::vector<ProcStat> left = Descendants(::getpid());
    if (left.empty()) return;
    record.left = Notes(left);
    relay_.Say("the action ended (" + exit_->ToString() +
               "); stopping what it left running: " + NameProcesses(left));
    StartStop();
  }

  void OnDeadline(SupervisorRecord& record) {
    if (phase_ == Phase::kTerm) {
      std::vector<ProcStat> left = Descendants(::getpid());
      relay_.Say("SIGKILL after " + FormatMs(options_.grace) + " to " + NameProcesses(left));
      phase_ = Phase::kKill;
      SignalAll(SIGKILL);
      deadline_ = Clock::now() + kKillWait;
    } else if (phase_ == Phase::kKill) {
      std::vector<ProcStat> stuck = Descendants(::getpid());
      record.stuck = Notes(stuck);
      relay_.Say("still there " + FormatMs(kKillWait) + " after SIGKILL: " + NameProcesses(stuck));
      phase_ = Phase::kGivenUp;
    }
  }

  SupervisorOptions options_;
  OutputRelay& relay_;
  pid_t action_;
  int output_;
  Phase phase_ = Phase::kRunning;
  Clock::time_point deadline_ = Clock::time_point::max();
  std::optional<ExitStatus> exit_;
};

// --grace MS, --log-cap BYTES, --redact NAME, then STATUS_FILE LOG_FILE -- PROGRAM [ARG...].
std::optional<SupervisorOptions> ParseArgs(int argc, char** argv, int& program_index) {
  SupervisorOptions options;
  int i = 2;
  auto number = [&](std::uint64_t& out) {
    if (i + 1 >= argc) return false;
    char* end = nullptr;
    out = std::strtoull(argv[i + 1], &end, 10);
    i += 2;
    return end && *end == '\0';
  };
  for (; i < argc && std::string_view(argv[i]).starts_with("--") && argv[i][2] != '\0';) {
    std::string_view flag = argv[i];
    std::uint64_t value = 0;
    if (flag == "--grace") {
      if (!number(value)) return std::nullopt;
      options.grace = std::chrono::milliseconds(value);
    } else if (flag == "--log-cap") {
      if (!number(value)) return std::nullopt;
      options.log_cap_bytes = value;
    } else if (flag == "--redact" && i + 1 < argc) {
      options.redact.emplace_back(argv[i + 1]);
      i += 2;
    } else if (flag == "--attempt" && i + 1 < argc) {
      if (std::sscanf(argv[i + 1], "%d/%d", &options.attempt, &options.attempts) != 2 ||
          options.attempt < 1 || options.attempts < 1)
        return std::nullopt;
      i += 2;
    } else {
      return std::nullopt;
    }
  }
  if (i + 3 >= argc || std::string_view(argv[i + 2]) != "--") return std::nullopt;
  options.status_file = argv[i];
  options.log_file = argv[i + 1];
  program_index = i + 3;
  return options;
}

}  // namespace

std::vector<std::string> SupervisorCommand(const std::string& deployd_exe,
                                           const SupervisorOptions& options) {
  std::vector<std::string> argv = {deployd_exe, std::string(kSuperviseFlag),
                                   "--grace",   std::to_string(options.grace.count()),
                                   "--log-cap", std::to_string(options.log_cap_bytes)};
  for (const std::string& name : options.redact) {
    argv.push_back("--redact");
    argv.push_back(name);
  }
  if (options.attempt > 0) {
    argv.push_back("--attempt");
    argv.push_back(std::to_string(options.attempt) + "/" + std::to_string(options.attempts));
  }
  argv.insert(argv.end(), {options.status_file, options.log_file, "--"});
  return argv;
}

int SuperviseMain(int argc, char** argv) {
  int program_index = 0;
  std::optional<SupervisorOptions> parsed = ParseArgs(argc, argv, program_index);
  if (!parsed) return Usage();
  const SupervisorOptions options = *parsed;

  // Outlive whatever stops the daemon; SIGTERM is the request to stop the attempt.
  for (int sig : {SIGINT, SIGHUP, SIGPIPE}) ::signal(sig, SIG_IGN);
  sigset_t handled;
  sigemptyset(&handled);
  sigaddset(&handled, SIGCHLD);
  sigaddset(&handled, SIGTERM);
  ::sigprocmask(SIG_BLOCK, &handled, nullptr);
  int signals = ::signalfd(-1, &handled, SFD_CLOEXEC | SFD_NONBLOCK);
  // Orphans of the attempt come here, not to init: nothing it starts can get away.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);

  std::vector<std::string> secrets;
  size_t longest = 0;
  for (const std::string& name : options.redact) {
    if (const char* value = ::getenv(name.c_str()); value && *value) {
      secrets.emplace_back(value);
      longest = std::max(longest, secrets.back().size());
    }
  }
  OutputRelay relay(options.log_file, options.log_cap_bytes, Redactor(secrets), longest);

  SupervisorRecord record;
  record.supervisor = ProcessIdentity::Of(::getpid()).value_or(ProcessIdentity{});
  record.action.boot_id = record.supervisor.boot_id;
  record.started_at_ms = NowMs();
  auto fail = [&](const std::string& error) {
    relay.Say(error);
    record.state = SupervisorRecord::State::kFailedToStart;
    record.error = error;
    record.ended_at_ms = NowMs();
    (void)WriteSupervisorRecord(options.status_file, record);
    std::string line = record.ToJson() + "\n";
    (void)!::write(STDOUT_FILENO, line.data(), line.size());
    return 1;
  };
  if (signals < 0) return fail(std::string("cannot watch signals: ") + ::strerror(errno));
  if (!relay.Open()) return fail("cannot open log " + options.log_file + ": " + ::strerror(errno));
  if (options.attempt > 0) relay.AttemptStarts(options.attempt, options.attempts, NowMs());
  record.state = SupervisorRecord::State::kStarting;
  if (Status s = WriteSupervisorRecord(options.status_file, record); !s.ok())
    return fail(s.message());  // without a status file nobody could learn how it ends

  int output[2];
  if (::pipe2(output, O_CLOEXEC) != 0)
    return fail(std::string("cannot prepare the action: ") + ::strerror(errno));
  SpawnRequest request;
  request.argv.assign(argv + program_index, argv + argc);
  for (char** e = environ; e && *e; ++e) request.env.emplace_back(*e);
  request.stdout_fd = output[1];
  request.stderr_fd = output[1];
  Result<Spawned> spawned = Spawn(request);
  ::close(output[1]);
  if (!spawned.ok()) return fail(spawned.status().message());
  ::close(spawned->pidfd);  // its exit reaches this subreaper as SIGCHLD
  ::fcntl(output[0], F_SETFL, O_NONBLOCK);

  record.state = SupervisorRecord::State::kRunning;
  record.action = ProcessIdentity::Of(spawned->pid)
                      .value_or(ProcessIdentity{spawned->pid, 0, record.supervisor.boot_id});
  if (Status s = WriteSupervisorRecord(options.status_file, record); !s.ok()) {
    relay.Say(s.message() + "; stopping the action: nobody could learn how it ends");
    ::kill(-spawned->pid, SIGKILL);
  }
  std::string line = record.ToJson() + "\n";
  (void)!::write(STDOUT_FILENO, line.data(), line.size());
  // Let go of deployd's pipe: its reader may go away at any time from now on.
  int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  ::dup2(null_fd, STDOUT_FILENO);
  ::dup2(relay.fd(), STDERR_FILENO);
  if (null_fd > STDERR_FILENO) ::close(null_fd);

  Supervision supervision(options, relay, spawned->pid, output[0]);
  supervision.Run(signals, record);
  relay.Report(record);
  record.state = SupervisorRecord::State::kExited;
  record.ended_at_ms = NowMs();
  if (Status s = WriteSupervisorRecord(options.status_file, record); !s.ok()) {
    relay.Say(s.message());
    return 1;
  }
  return 0;
}

}  // namespace deployd
