#include "actions/download_action.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

#include "process/blocking_command.h"
#include "process/exit_status.h"
#include "process/spawn.h"
#include "util/line_splitter.h"
#include "util/pattern.h"
#include "util/units.h"

namespace deployd {
namespace {

namespace fs = std::filesystem;

// ---------------------------------------------------------------- the tree under `to`

struct TreeSize {
  std::uint64_t files = 0;
  std::uint64_t bytes = 0;
};

// Regular files under `dir` (symlinks not followed), by length. With `skip_hf_cache` the
// top-level .cache (huggingface_hub's bookkeeping and partial files) is left out.
TreeSize MeasureTree(const fs::path& dir, bool skip_hf_cache) {
  TreeSize size;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (skip_hf_cache && it.depth() == 0 && it->path().filename() == ".cache") {
      it.disable_recursion_pending();
      continue;
    }
    std::error_code entry_ec;
    if (!it->is_regular_file(entry_ec) || it->is_symlink(entry_ec)) continue;
    std::uintmax_t n = it->file_size(entry_ec);
    if (entry_ec) continue;  // gone since it was listed
    ++size.files;
    size.bytes += n;
  }
  return size;
}

// Bytes an unprivileged process may still write on the filesystem holding `dir`.
std::optional<std::uint64_t> FreeBytes(const std::string& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return std::nullopt;
  return static_cast<std::uint64_t>(st.f_bavail) * st.f_frsize;
}

std::string FreeText(const std::string& dir) {
  auto free = FreeBytes(dir);
  return free ? FormatSize(*free) + " free" : std::string("free space unknown");
}

Status CheckSpace(const DownloadAction& action) {
  if (!action.size) return Status::Ok();
  auto free = FreeBytes(action.to);
  if (!free) {
    return Status::Error("cannot read the free space under " + action.to + ": " +
                         std::strerror(errno));
  }
  // .incomplete files resume, so what is there (partial or whole) counts toward the total.
  std::uint64_t there = MeasureTree(action.to, false).bytes;
  if (*free + there >= *action.size) return Status::Ok();
  return Status::Error("not enough space under " + action.to + " for " + action.repo + ": needs " +
                       FormatSize(*action.size) + ", " + FormatSize(*free) + " free and " +
                       FormatSize(there) + " already there");
}

// ---------------------------------------------------------------- stale locks

struct FileId {
  dev_t dev;
  ino_t ino;
  auto operator<=>(const FileId&) const = default;
};

// Every file some process has open, by identity. stat() through /proc/PID/fd/N reaches the
// open file itself, whatever path it was opened by (or if it was unlinked since).
std::set<FileId> OpenFiles(const std::set<FileId>& wanted) {
  std::set<FileId> open;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return open;
  while (dirent* p = ::readdir(proc)) {
    if (p->d_name[0] < '0' || p->d_name[0] > '9') continue;
    std::string fd_dir = std::string("/proc/") + p->d_name + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (fds == nullptr) continue;  // exited, or another user's
    while (dirent* f = ::readdir(fds)) {
      if (f->d_name[0] == '.') continue;
      struct stat st {};
      if (::stat((fd_dir + "/" + f->d_name).c_str(), &st) != 0) continue;
      FileId id{st.st_dev, st.st_ino};
      if (wanted.contains(id)) open.insert(id);
    }
    ::closedir(fds);
  }
  ::closedir(proc);
  return open;
}

std::string JoinFirst(const std::vector<std::string>& items, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < items.size() && i < n; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > n) out += ", …";
  return out;
}

// ---------------------------------------------------------------- the downloader's output

// deployd's own patterns, which compile.
PatternSet BuiltinPattern(std::string_view pattern) { return CompilePattern(pattern).value(); }

// The lines that tell why a download failed, kept as they pass (the output is not stored).
class FailureClues {
 public:
  void Add(const std::string& line) {
    last_ = line;
    Keep(line, kAuth, auth_);
    Keep(line, kNoSpace, no_space_);
    Keep(line, kRange, range_);
  }

  // The error for a downloader that exited with `how` ("exited with status 1").
  Status Explain(const std::string& tool, const std::string& how, const DownloadAction& action,
                 bool have_token) const {
    if (!auth_.empty()) return ExplainAuth(action, have_token);
    if (!no_space_.empty()) {
      return Status::Error("no space left on device under " + action.to + " (" +
                           FreeText(action.to) + "): " + no_space_.front());
    }
    std::string head = tool + " " + how;
    if (!range_.empty()) {
      return Status::Error(head +
                           ": the server refused to resume a partial download (416); delete "
                           "the stale .incomplete files under " +
                           action.to +
                           "/.cache/huggingface/download and run it again: " + range_.front());
    }
    return Status::Error(last_.empty() ? head + " and printed nothing" : head + ": " + last_);
  }

 private:
  static constexpr std::size_t kKept = 16;
  // notes §7 (and the lines that explain it), §8, §5.
  static inline const PatternSet kAuth = BuiltinPattern(
      "(?i)GatedRepoError|Cannot access gated repo|RepositoryNotFoundError|Repository Not Found|"
      "not in the authorized list|401 Client Error|403 Client Error");
  static inline const PatternSet kNoSpace =
      BuiltinPattern("(?i)Errno 28|No space left on device|not enough free disk space");
  static inline const PatternSet kRange =
      BuiltinPattern("(?i)416 Client Error|Range Not Satisfiable");

  static void Keep(const std::string& line, const PatternSet& re, std::vector<std::string>& into) {
    if (into.size() < kKept && re.Matches(line)) into.push_back(line);
  }

  // The first kept line containing any of `needles`, tried in order; else the first line.
  std::string Quote(std::initializer_list<std::string_view> needles) const {
    for (std::string_view needle : needles) {
      for (const std::string& line : auth_) {
        if (line.find(needle) != std::string::npos) return line;
      }
    }
    return auth_.front();
  }
  bool Saw(std::string_view needle) const {
    return std::any_of(auth_.begin(), auth_.end(), [&](const std::string& line) {
      return line.find(needle) != std::string::npos;
    });
  }

  Status ExplainAuth(const DownloadAction& action, bool have_token) const {
    const std::string repo = "repository " + action.repo;
    if (Saw("not in the authorized list") || Saw("403 Client Error")) {
      return Status::Error(repo +
                           " is gated and the token's account has not been granted access: "
                           "request it at https://huggingface.co/" +
                           action.repo + ": " +
                           Quote({"not in the authorized list", "Cannot access gated repo"}));
    }
    bool gated = Saw("GatedRepoError") || Saw("Cannot access gated repo");
    if (!gated && (Saw("RepositoryNotFoundError") || Saw("Repository Not Found"))) {
      return Status::Error(repo +
                           (have_token ? " was not found (or the token cannot see it): "
                                       : " was not found, or is private and needs a "
                                         "token (set HF_TOKEN in the plan's secrets): ") +
                           Quote({"Repository Not Found", "RepositoryNotFoundError"}));
    }
    if (have_token) {
      return Status::Error(repo + " refused the token in HF_TOKEN (401): check that it is valid: " +
                           Quote({"Cannot access gated repo", "GatedRepoError", "401"}));
    }
    return Status::Error(repo + " is gated or needs a token: set HF_TOKEN in the plan's secrets: " +
                         Quote({"Cannot access gated repo", "GatedRepoError"}));
  }

  std::string last_;
  std::vector<std::string> auth_;
  std::vector<std::string> no_space_;
  std::vector<std::string> range_;
};

std::string_view TrimRight(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// tqdm redraws each bar many times a second ("model-00001-of-00064.safetensors:  45%|####  |
// 2.2G/5.0G [01:02<01:20, 35.1MB/s]"): over a 540 GB download that is millions of lines in the
// step's log. A bar (known by its text before the percentage) is relayed at most once a second,
// and always when it reaches 100%; every other line at once. Progress itself is measured from
// the bytes on disk, not from these lines.
class BarThrottle {
 public:
  bool Pass(std::string_view line, std::chrono::steady_clock::time_point now) {
    size_t bar = line.find("%|");
    if (bar == std::string_view::npos) return true;
    size_t start = bar;
    while (start > 0 &&
           (std::isdigit(static_cast<unsigned char>(line[start - 1])) || line[start - 1] == '.'))
      --start;
    if (line.substr(start, bar - start) == "100") return true;
    std::string label(TrimRight(line.substr(0, start)));
    auto [last, first] = last_.try_emplace(label, now);
    if (!first && now - last->second < std::chrono::seconds(1)) return false;
    last->second = now;
    return true;
  }

 private:
  std::map<std::string, std::chrono::steady_clock::time_point> last_;
};

bool HaveToken() {
  for (const char* name : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') return true;
  }
  return false;
}

// ---------------------------------------------------------------- running the downloader

// Raw syscall: glibc 2.36's <sys/pidfd.h> lacks extern "C" (see build-facts §6).
int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0u)); }

// SIGTERM and SIGINT blocked and readable from a signalfd while the downloader runs, so that
// one sent to this process alone can be forwarded; the old mask comes back on destruction.
class StopSignals {
 public:
  StopSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    ::pthread_sigmask(SIG_BLOCK, &set_, &old_);
    fd_ = ::signalfd(-1, &set_, SFD_CLOEXEC | SFD_NONBLOCK);
  }
  ~StopSignals() {
    if (fd_ >= 0) ::close(fd_);
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

  int fd() const { return fd_; }
  const sigset_t& stop_set() const { return set_; }
  // The signal read, or 0.
  int Read() {
    signalfd_siginfo info{};
    if (::read(fd_, &info, sizeof info) != static_cast<ssize_t>(sizeof info)) return 0;
    return static_cast<int>(info.ssi_signo);
  }

 private:
  sigset_t set_{};
  sigset_t old_{};
  int fd_ = -1;
};

struct Started {
  pid_t pid = -1;
  int output = -1;  // read end of stdout+stderr, non-blocking
};

// Starts argv in our process group (the engine's group kill reaches it) with stdin /dev/null
// and stdout and stderr on one pipe, the signals at their defaults and unblocked.
Result<Started> StartTool(const std::vector<std::string>& argv) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    return Status::Error(std::string("pipe: ") + std::strerror(errno));
  SpawnRequest request;
  request.argv = argv;
  request.env = ChildEnvironment({});
  request.new_session = false;
  request.stdout_fd = pipe_fds[1];
  Result<Spawned> spawned = Spawn(request);
  ::close(pipe_fds[1]);
  if (!spawned.ok()) {
    ::close(pipe_fds[0]);
    return spawned.status();
  }
  ::close(spawned->pidfd);
  ::fcntl(pipe_fds[0], F_SETFL, ::fcntl(pipe_fds[0], F_GETFL) | O_NONBLOCK);
  return Started{spawned->pid, pipe_fds[0]};
}

// Reads what is in the pipe now; false at end of file.
bool Drain(int fd, LineSplitter& splitter, const LineSplitter::LineHandler& on_line) {
  char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      splitter.Feed(std::string_view(buf, static_cast<std::size_t>(n)), on_line);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

// Relays the downloader's output until it exits (and its pipe is drained), forwarding a stop
// signal; returns its wait status.
int Supervise(const Started& child, StopSignals& signals, const std::string& tool,
              const ActionContext& ctx, const LineSplitter::LineHandler& on_line) {
  LineSplitter splitter;
  int pidfd = PidfdOpen(child.pid);
  bool open = true;
  while (open) {
    pollfd fds[3] = {{child.output, POLLIN, 0}, {signals.fd(), POLLIN, 0}, {pidfd, POLLIN, 0}};
    // Without a pidfd the loop ends at end of file; with one, also when the downloader has
    // exited but something it started still holds the pipe.
    int n = ::poll(fds, pidfd >= 0 ? 3 : 2, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[1].revents & POLLIN) {
      if (int sig = signals.Read()) {
        ctx.say(std::string(sig == SIGTERM ? "SIGTERM" : "SIGINT") + " received: stopping " + tool +
                " (pid " + std::to_string(child.pid) + ")");
        ::kill(child.pid, sig);  // not reaped yet, so the pid is still the downloader's
      }
    }
    if (fds[0].revents & (POLLIN | POLLHUP | POLLERR))
      open = Drain(child.output, splitter, on_line);
    if (pidfd >= 0 && (fds[2].revents & POLLIN)) {
      Drain(child.output, splitter, on_line);
      open = false;
    }
  }
  splitter.Flush(on_line);
  if (pidfd >= 0) ::close(pidfd);
  ::close(child.output);
  int status = 0;
  while (::waitpid(child.pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

// The download's own sentence about how the tool ended ("hf exited with status 3", "hf was
// killed by SIGTERM"): a verb phrase after the tool's name, unlike ExitStatus::ToString().
std::string DescribeExit(const ExitStatus& exit) {
  if (exit.signal == 0) return "exited with status " + std::to_string(exit.code);
  int sig = exit.signal;
  const char* name = sig == SIGTERM   ? "SIGTERM"
                     : sig == SIGKILL ? "SIGKILL"
                     : sig == SIGINT  ? "SIGINT"
                                      : nullptr;
  return std::string("was killed by ") + (name ? name : "signal " + std::to_string(sig));
}

// The option syntax of the tool found; asks `hf version` only when it matters (several
// patterns of one kind).
PatternSyntax SyntaxFor(const std::string& tool, const DownloadAction& action,
                        const ActionContext& ctx) {
  if (tool != "hf") return PatternSyntax::kList;
  if (action.include.size() < 2 && action.exclude.size() < 2) return PatternSyntax::kRepeated;
  auto version = BlockingCommandRunner(std::chrono::seconds(60))({"hf", "version"});
  if (!version.ok()) {
    ctx.say("cannot tell hf's version (" + version.status().message() +
            "): assuming hf 1.x, which takes --include once per pattern");
    return PatternSyntax::kRepeated;
  }
  return HfPatternSyntax(version.value());
}

std::string ShowArgv(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    bool plain = !a.empty() && a.find_first_of(" \t'\"*?[]$\\") == std::string::npos;
    out += (out.empty() ? "" : " ") + (plain ? a : "'" + a + "'");
  }
  return out;
}

}  // namespace

Result<std::string> ResolveDownloader(const std::string& path_env) {
  for (const char* tool : {"hf", "huggingface-cli"}) {
    std::string_view rest = path_env;
    while (true) {
      std::size_t colon = rest.find(':');
      std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) {
        std::string candidate = std::string(dir) + "/" + tool;
        struct stat st {};
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
            ::access(candidate.c_str(), X_OK) == 0) {
          return std::string(tool);
        }
      }
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  return Status::Error(
      "neither hf nor huggingface-cli is on PATH (" + path_env +
      "): install huggingface_hub for deployd's user, or add its bin directory to deployd's PATH");
}

std::vector<std::string> DownloadArgv(const std::string& tool, const DownloadAction& action,
                                      PatternSyntax syntax) {
  std::vector<std::string> argv = {tool, "download", action.repo, "--local-dir", action.to};
  if (!action.revision.empty()) {
    argv.push_back("--revision");
    argv.push_back(action.revision);
  }
  auto patterns = [&](const char* flag, const std::vector<std::string>& list) {
    for (std::size_t i = 0; i < list.size(); ++i) {
      if (i == 0 || syntax == PatternSyntax::kRepeated) argv.push_back(flag);
      argv.push_back(list[i]);
    }
  };
  patterns("--include", action.include);
  patterns("--exclude", action.exclude);
  return argv;
}

std::vector<std::string> DownloadArgv(const std::string& tool, const DownloadAction& action) {
  return DownloadArgv(tool, action, tool == "hf" ? PatternSyntax::kRepeated : PatternSyntax::kList);
}

PatternSyntax HfPatternSyntax(const std::string& version_output) {
  static const PatternSet kVersion = BuiltinPattern(R"(version:?\s*\d+\.)");
  if (std::optional<PatternMatch> m = kVersion.FirstMatch(version_output)) {
    // The major version: the digits before the match's final '.'.
    std::string_view text = std::string_view(version_output).substr(m->offset, m->length - 1);
    if (text.substr(text.find_last_not_of("0123456789") + 1) == "0") return PatternSyntax::kList;
  }
  return PatternSyntax::kRepeated;
}

std::vector<std::string> SweepStaleLocks(const std::string& dir) {
  std::vector<std::pair<std::string, FileId>> locks;
  std::error_code ec;
  fs::recursive_directory_iterator it(fs::path(dir) / ".cache" / "huggingface",
                                      fs::directory_options::skip_permission_denied, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().extension() != ".lock") continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    locks.emplace_back(it->path().string(), FileId{st.st_dev, st.st_ino});
  }
  if (locks.empty()) return {};
  std::set<FileId> ids;
  for (const auto& lock : locks) ids.insert(lock.second);
  std::set<FileId> held = OpenFiles(ids);
  std::vector<std::string> swept;
  for (const auto& [path, id] : locks) {
    if (!held.contains(id) && ::unlink(path.c_str()) == 0) swept.push_back(path);
  }
  std::sort(swept.begin(), swept.end());
  return swept;
}

Status RunDownloadAction(const DownloadAction& action, const ActionContext& ctx) {
  std::error_code ec;
  fs::create_directories(action.to, ec);
  if (ec) return Status::Error("cannot create " + action.to + ": " + ec.message());
  if (Status space = CheckSpace(action); !space.ok()) return space;

  std::vector<std::string> swept = SweepStaleLocks(action.to);
  if (!swept.empty()) {
    ctx.say("removed " + std::to_string(swept.size()) + " stale lock file" +
            (swept.size() == 1 ? "" : "s") + " that no process holds (left by an interrupted " +
            "download): " + JoinFirst(swept, 5));
  }

  const char* path = std::getenv("PATH");
  auto tool = ResolveDownloader(path ? path : "");
  if (!tool.ok()) return tool.status();
  std::vector<std::string> argv = DownloadArgv(*tool, action, SyntaxFor(*tool, action, ctx));
  ctx.say("running " + ShowArgv(argv));

  FailureClues clues;
  BarThrottle bars;
  auto on_line = [&](std::string_view raw) {
    std::string_view line = TrimRight(raw);
    if (line.empty()) return;  // tqdm erases its bar with spaces before a log line
    if (bars.Pass(line, std::chrono::steady_clock::now())) ctx.say(line);
    clues.Add(std::string(line));
  };
  auto started = std::chrono::steady_clock::now();
  ExitStatus ended;
  {
    StopSignals signals;
    auto child = StartTool(argv);
    if (!child.ok()) return child.status();
    ended = ExitStatus::FromWaitStatus(Supervise(child.value(), signals, *tool, ctx, on_line));
  }
  auto elapsed = std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now() - started);

  if (ended.ok()) {
    TreeSize size = MeasureTree(action.to, true);
    ctx.say("downloaded " + action.repo + " into " + action.to + ": " + std::to_string(size.files) +
            " file" + (size.files == 1 ? "" : "s") + ", " + FormatSize(size.bytes) + " in " +
            FormatDuration(elapsed));
    return Status::Ok();
  }
  return clues.Explain(*tool, DescribeExit(ended), action, HaveToken());
}

}  // namespace deployd
