#include "checks/checks.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <boost/system/system_error.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

#include "checks/http_probe.h"
#include "checks/json_expect.h"
#include "checks/probe_request.h"
#include "checks/version.h"
#include "checks/weights_check.h"
#include "process/child_process.h"
#include "util/units.h"

namespace deployd {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

constexpr auto kAsTuple = asio::as_tuple(asio::use_awaitable);

std::string& ProbeProgramRef() {
  static std::string program = "/proc/self/exe";
  return program;
}
const std::string& ProbeProgram() { return ProbeProgramRef(); }

// A run probe past its timeout gets SIGTERM, then SIGKILL after this: a probe is a quick
// question, not a server that needs time to shut down cleanly.
constexpr Duration kRunGrace = std::chrono::seconds(2);
// What a run probe keeps of its output: the last lines for evidence, and the start (bounded)
// for output_matches and version_at_least.
constexpr size_t kRunTailLines = 50;
constexpr size_t kRunMatchBytes = 64 << 10;
constexpr size_t kMaxLineBytes = 1000;
constexpr size_t kBodyExcerptBytes = 512;
constexpr size_t kCommandTextChars = 60;

std::string_view KindName(CheckKind kind) {
  switch (kind) {
    case CheckKind::kRun:
      return "run";
    case CheckKind::kHttp:
      return "http";
    case CheckKind::kTcp:
      return "tcp";
    case CheckKind::kFile:
      return "file";
    case CheckKind::kCommand:
      return "command";
    case CheckKind::kDiskFree:
      return "disk_free";
    case CheckKind::kPortFree:
      return "port_free";
    case CheckKind::kWeightsComplete:
      return "weights_complete";
    case CheckKind::kService:
      return "service";
    case CheckKind::kProcess:
      return "process";
    case CheckKind::kGpusFree:
      return "gpus_free";
  }
  return "check";
}

std::string CommandText(const Command& command) {
  if (command.shell) return command.script;
  std::string text;
  for (const std::string& arg : command.argv) {
    if (!text.empty()) text += ' ';
    bool plain = !arg.empty() && arg.find_first_of(" \t\n'\"\\$`") == std::string::npos;
    text += plain ? arg : "'" + arg + "'";
  }
  return text;
}

// At most `max_bytes` of `text` as valid UTF-8 (invalid bytes become U+FFFD), with "…" when
// cut: a server's body or a program's output may be anything, and evidence is JSON text that
// clients decode strictly.
std::string Excerpt(std::string_view text, size_t max_bytes) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    auto byte = static_cast<unsigned char>(text[i]);
    size_t length = byte < 0x80                    ? 1
                    : byte >= 0xC2 && byte <= 0xDF ? 2
                    : byte >= 0xE0 && byte <= 0xEF ? 3
                    : byte >= 0xF0 && byte <= 0xF4 ? 4
                                                   : 0;
    for (size_t k = 1; k < length; ++k)
      if (i + k >= text.size() || (static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80)
        length = 0;
    std::string_view piece = length ? text.substr(i, length) : kReplacement;
    if (out.size() + piece.size() > max_bytes) return out + "…";
    out += piece;
    i += length ? length : 1;
  }
  return out;
}

std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::string TcpHost(const Check& check) { return check.host.empty() ? "127.0.0.1" : check.host; }
std::string BindHost(const Check& check) { return check.host.empty() ? "0.0.0.0" : check.host; }

// What a summary starts with: the kind and its object, without the expectation.
std::string Target(const Check& check);

std::string Subject(const Check& check) {
  std::string kind(KindName(check.kind));
  switch (check.kind) {
    case CheckKind::kRun:
      return kind + " '" + Excerpt(CommandText(check.command), kCommandTextChars) + "'";
    case CheckKind::kHttp:
      return kind + " " + check.method + " " + check.url;
    case CheckKind::kTcp:
      return kind + " " + HostPort(TcpHost(check), check.port);
    case CheckKind::kFile:
    case CheckKind::kDiskFree:
    case CheckKind::kWeightsComplete:
      return kind + " " + check.path;
    case CheckKind::kCommand:
      return kind + " " + check.name;
    case CheckKind::kPortFree:
      return kind + " " + HostPort(BindHost(check), check.port);
    case CheckKind::kService:
    case CheckKind::kProcess:
    case CheckKind::kGpusFree:
      return kind + " " + Target(check);
  }
  return kind;
}

std::string Target(const Check& check) {
  switch (check.kind) {
    case CheckKind::kRun:
      return CommandText(check.command);
    case CheckKind::kHttp:
      return check.method + " " + check.url;
    case CheckKind::kTcp:
      return HostPort(TcpHost(check), check.port);
    case CheckKind::kFile:
    case CheckKind::kDiskFree:
    case CheckKind::kWeightsComplete:
      return check.path;
    case CheckKind::kCommand:
      return check.name;
    case CheckKind::kPortFree:
      return HostPort(BindHost(check), check.port);
    case CheckKind::kService:
      return check.unit;
    case CheckKind::kProcess:
      return "'" + check.match + "'";
    case CheckKind::kGpusFree: {
      if (check.gpu.gpus.empty()) return "all";
      std::string list;
      for (int gpu : check.gpu.gpus) list += (list.empty() ? "" : ",") + std::to_string(gpu);
      return list;
    }
  }
  return "";
}

json::object BaseEvidence(const Check& check) {
  json::object evidence;
  evidence["check"] = KindName(check.kind);
  evidence["target"] = Target(check);
  return evidence;
}

CheckOutcome Outcome(const Check& check, bool passed, const std::string& detail,
                     json::object evidence) {
  CheckOutcome outcome;
  outcome.passed = passed;
  outcome.summary = Subject(check) + ": " + detail;
  outcome.evidence = std::move(evidence);
  return outcome;
}

// Cancellation is not an outcome: it leaves as operation_aborted, like any cancelled Asio
// operation, so that the caller's coroutine unwinds to its edge.
asio::awaitable<void> ThrowIfCancelled() {
  asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
  if (state.cancelled() != asio::cancellation_type::none)
    throw boost::system::system_error(asio::error::operation_aborted);
}

// The regex of output_matches and fail_on: ECMAScript, "(?i)" in front for case-insensitive.
std::regex CompileOutputRegex(std::string_view pattern) {
  auto flags = std::regex::ECMAScript;
  if (pattern.substr(0, 4) == "(?i)") {
    pattern.remove_prefix(4);
    flags |= std::regex::icase;
  }
  return std::regex(pattern.begin(), pattern.end(), flags);
}

// ---- http, tcp

asio::awaitable<CheckOutcome> ProbeHttp(const Check& check) {
  json::object evidence = BaseEvidence(check);
  HttpRequest request;
  request.method = check.method;
  request.url = check.url;
  request.body = check.body;
  request.timeout = check.timeout;
  Result<HttpResponse> response = co_await HttpProbe(request);
  if (!response.ok()) {
    evidence["error"] = response.status().message();
    co_return Outcome(check, false, response.status().message(), std::move(evidence));
  }
  evidence["status_code"] = response->status;
  evidence["body_excerpt"] = Excerpt(response->body, kBodyExcerptBytes);
  if (response->body_too_large) evidence["body_too_large"] = true;
  std::string status = "status " + std::to_string(response->status);
  if (response->status != check.status)
    co_return Outcome(check, false, status + " (expected " + std::to_string(check.status) + ")",
                      std::move(evidence));
  if (!check.body_contains.empty() && response->body.find(check.body_contains) == std::string::npos)
    co_return Outcome(check, false,
                      status + ", body does not contain '" + check.body_contains + "'" +
                          (response->body_too_large ? " in its first 4MiB" : ""),
                      std::move(evidence));
  if (std::optional<std::string> unmet = FirstUnmetExpectation(response->body, check.json)) {
    evidence["error"] = *unmet;
    co_return Outcome(check, false, status + ", " + *unmet, std::move(evidence));
  }
  if (!check.json.empty())
    status += ", " + std::to_string(check.json.size()) +
              (check.json.size() == 1 ? " json expectation met" : " json expectations met");
  co_return Outcome(check, true, status, std::move(evidence));
}

asio::awaitable<CheckOutcome> ProbeTcp(const Check& check) {
  json::object evidence = BaseEvidence(check);
  Status connected = co_await TcpProbe(TcpHost(check), check.port, check.timeout);
  if (!connected.ok()) {
    evidence["error"] = connected.message();
    co_return Outcome(check, false, connected.message(), std::move(evidence));
  }
  co_return Outcome(check, true, "connected", std::move(evidence));
}

// ---- file, command, disk_free

// Files only, a few KiB a shard (weights_check.h); no sha256 here, as hashing hundreds of GB
// would block the daemon's one thread.
CheckOutcome ProbeWeights(const Check& check) {
  Result<WeightsCheckOutcome> result = CheckWeightsComplete(check.path);
  if (!result.ok()) {
    json::object evidence = BaseEvidence(check);
    evidence["error"] = result.status().message();
    return Outcome(check, false, result.status().message(), std::move(evidence));
  }
  json::object evidence = std::move(result->evidence);
  evidence["check"] = KindName(check.kind);
  // The library's summary reads "weights DIR: what was seen"; ours names the check kind.
  std::string detail = result->summary;
  std::string prefix = "weights " + check.path + ": ";
  if (detail.rfind(prefix, 0) == 0) detail = detail.substr(prefix.size());
  return Outcome(check, result->passed, detail, std::move(evidence));
}

CheckOutcome ProbeFile(const Check& check) {
  json::object evidence = BaseEvidence(check);
  struct stat st;
  if (::stat(check.path.c_str(), &st) != 0) {
    int error = errno;
    if (error != ENOENT && error != ENOTDIR) {
      std::string message = std::string("cannot stat: ") + std::strerror(error);
      evidence["error"] = message;
      return Outcome(check, false, message, std::move(evidence));
    }
    evidence["exists"] = false;
    if (check.absent) return Outcome(check, true, "absent", std::move(evidence));
    evidence["error"] = "no such file";
    return Outcome(check, false, "does not exist", std::move(evidence));
  }
  std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
  evidence["exists"] = true;
  evidence["type"] = S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "directory" : "other";
  evidence["size"] = size;
  if (check.absent) return Outcome(check, false, "exists (expected absent)", std::move(evidence));
  if (check.min_size && size < *check.min_size) {
    evidence["min_size"] = *check.min_size;
    return Outcome(check, false,
                   FormatSize(size) + ", expected at least " + FormatSize(*check.min_size),
                   std::move(evidence));
  }
  return Outcome(check, true, "exists (" + FormatSize(size) + ")", std::move(evidence));
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

CheckOutcome ProbeCommand(const Check& check) {
  json::object evidence = BaseEvidence(check);
  if (check.name.find('/') != std::string::npos) {
    if (IsExecutableFile(check.name)) {
      evidence["path"] = check.name;
      return Outcome(check, true, "executable", std::move(evidence));
    }
    evidence["error"] = "not an executable file";
    return Outcome(check, false, "not an executable file", std::move(evidence));
  }
  // The same search execvp does, so that a pass means a `run` step can start it. Alternatives
  // (huggingface-cli for hf) are tried in order after the name.
  const char* env_path = std::getenv("PATH");
  std::string path_list = env_path ? env_path : "/bin:/usr/bin";
  json::array searched;
  std::vector<std::string> names = {check.name};
  names.insert(names.end(), check.alternatives.begin(), check.alternatives.end());
  for (const std::string& name : names) {
    size_t start = 0;
    while (true) {
      size_t colon = path_list.find(':', start);
      std::string dir = path_list.substr(start, colon == std::string::npos ? colon : colon - start);
      if (dir.empty()) dir = ".";
      std::string candidate = dir + "/" + name;
      if (IsExecutableFile(candidate)) {
        evidence["path"] = candidate;
        return Outcome(check, true, candidate, std::move(evidence));
      }
      if (name == check.name) searched.push_back(json::value(dir));
      if (colon == std::string::npos) break;
      start = colon + 1;
    }
  }
  std::string message = "not found on PATH";
  if (!check.alternatives.empty()) {
    message = "neither " + check.name;
    for (const std::string& name : check.alternatives) message += " nor " + name;
    message += " is on PATH";
  }
  evidence["error"] = message;
  evidence["searched"] = std::move(searched);
  return Outcome(check, false, message, std::move(evidence));
}

// Bytes of the regular files under `path` (not following symlinks); 0 when it does not exist.
std::uint64_t BytesUnder(const std::string& path) {
  std::error_code ec;
  std::uint64_t total = 0;
  namespace fs = std::filesystem;
  for (fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec),
       end;
       !ec && it != end; it.increment(ec)) {
    std::error_code size_ec;
    if (it->is_regular_file(size_ec)) total += it->file_size(size_ec);
  }
  return total;
}

CheckOutcome ProbeDiskFree(const Check& check) {
  json::object evidence = BaseEvidence(check);
  // A download's destination that does not exist yet is measured where it will be created.
  // A path the plan names for disk_free itself must exist: a mistyped mount point would
  // otherwise be measured on the root filesystem.
  std::filesystem::path where = check.path;
  std::error_code ec;
  while (check.credit_existing && !std::filesystem::exists(where, ec) && where.has_parent_path() &&
         where != where.parent_path())
    where = where.parent_path();
  if (where != std::filesystem::path(check.path)) evidence["measured_at"] = where.string();
  struct statvfs vfs;
  if (::statvfs(where.c_str(), &vfs) != 0) {
    std::string message = std::strerror(errno);
    evidence["error"] = message;
    return Outcome(check, false, message, std::move(evidence));
  }
  std::uint64_t free_bytes = static_cast<std::uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  evidence["free_bytes"] = free_bytes;
  evidence["required_bytes"] = check.at_least;
  evidence["free"] = FormatSize(free_bytes);
  evidence["required"] = FormatSize(check.at_least);
  std::string detail =
      FormatSize(free_bytes) + " free, " + FormatSize(check.at_least) + " required";
  std::uint64_t available = free_bytes;
  if (check.credit_existing) {
    // A resumed download needs only what is still missing.
    std::uint64_t present = BytesUnder(check.path);
    available += present;
    evidence["present_bytes"] = present;
    if (present > 0) detail += " (" + FormatSize(present) + " already there)";
  }
  return Outcome(check, available >= check.at_least, detail, std::move(evidence));
}

// ---- port_free

struct Holder {
  long pid = 0;
  std::string comm;
};

// The socket inode of a listener on `port` (any address), from /proc/net/tcp{,6}.
std::optional<std::string> FindListenerInode(int port) {
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
      fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode;
      size_t colon = local.rfind(':');
      if (colon == std::string::npos || state != "0A") continue;  // 0A: LISTEN
      if (std::stoi(local.substr(colon + 1), nullptr, 16) == port) return inode;
    }
  }
  return std::nullopt;
}

// Which process holds socket `inode` open; only processes this daemon may inspect are seen.
std::optional<Holder> FindSocketHolder(const std::string& inode) {
  std::string wanted = "socket:[" + inode + "]";
  DIR* proc = ::opendir("/proc");
  if (!proc) return std::nullopt;
  std::optional<Holder> found;
  while (dirent* entry = ::readdir(proc)) {
    if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
    std::string fd_dir = std::string("/proc/") + entry->d_name + "/fd";
    DIR* fds = ::opendir(fd_dir.c_str());
    if (!fds) continue;
    while (dirent* fd = ::readdir(fds)) {
      char link[64];
      std::string fd_path = fd_dir + "/" + fd->d_name;
      ssize_t n = ::readlink(fd_path.c_str(), link, sizeof link - 1);
      if (n <= 0 || wanted != std::string_view(link, n)) continue;
      Holder holder;
      holder.pid = std::atol(entry->d_name);
      std::ifstream comm(std::string("/proc/") + entry->d_name + "/comm");
      std::getline(comm, holder.comm);
      found = holder;
      break;
    }
    ::closedir(fds);
    if (found) break;
  }
  ::closedir(proc);
  return found;
}

CheckOutcome PortInUse(const Check& check, json::object evidence) {
  evidence["error"] = HostPort(BindHost(check), check.port) + " is in use";
  std::string detail = "in use";
  if (std::optional<std::string> inode = FindListenerInode(check.port)) {
    if (std::optional<Holder> holder = FindSocketHolder(*inode)) {
      evidence["pid"] = holder->pid;
      evidence["comm"] = holder->comm;
      detail += " by pid " + std::to_string(holder->pid) + " (" + holder->comm + ")";
    }
  }
  return Outcome(check, false, detail, std::move(evidence));
}

CheckOutcome ProbePortFree(const Check& check) {
  json::object evidence = BaseEvidence(check);
  std::string host = BindHost(check);
  if (host == "localhost") host = "127.0.0.1";
  sockaddr_storage address{};
  socklen_t address_size = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(check.port));
    address_size = sizeof *v4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(check.port));
    address_size = sizeof *v6;
  } else {
    std::string message = "'" + host + "' is not an IP address";
    evidence["error"] = message;
    return Outcome(check, false, message, std::move(evidence));
  }

  int fd = ::socket(address.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    std::string message = std::string("cannot create a socket: ") + std::strerror(errno);
    evidence["error"] = message;
    return Outcome(check, false, message, std::move(evidence));
  }
  // SO_REUSEADDR: a port whose last connection lingers in TIME_WAIT is free for a server.
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int bound = ::bind(fd, reinterpret_cast<sockaddr*>(&address), address_size);
  int error = errno;
  ::close(fd);
  if (bound == 0) return Outcome(check, true, "free", std::move(evidence));
  if (error == EADDRINUSE) return PortInUse(check, std::move(evidence));
  if (error == EACCES) {
    // A privileged port and an unprivileged daemon: bind cannot tell, the listener table can.
    evidence["method"] = "/proc/net/tcp";
    if (FindListenerInode(check.port)) return PortInUse(check, std::move(evidence));
    return Outcome(check, true, "free", std::move(evidence));
  }
  std::string message = std::string("cannot bind: ") + std::strerror(error);
  evidence["error"] = message;
  return Outcome(check, false, message, std::move(evidence));
}

// ---- run

// Shared by the probe and the child's callbacks, which may outlive the probe's coroutine when
// it is cancelled.
struct RunProbeState {
  explicit RunProbeState(asio::any_io_executor ex) : wake(ex) {}

  void AddLine(std::string_view line) {
    ++line_count;
    std::string kept = Excerpt(line, kMaxLineBytes);
    if (head_bytes + kept.size() <= kRunMatchBytes) {
      head_bytes += kept.size() + 1;
      head.push_back(kept);
    }
    tail.push_back(std::move(kept));
    if (tail.size() > kRunTailLines) tail.pop_front();
  }

  // The lines output_matches and version_at_least look at, in order: the start of the output
  // and, when it was longer than that, its end.
  std::vector<std::string_view> MatchLines() const {
    std::vector<std::string_view> lines(head.begin(), head.end());
    size_t first_tail_index = line_count - tail.size();
    for (size_t i = 0; i < tail.size(); ++i)
      if (first_tail_index + i >= head.size()) lines.push_back(tail[i]);
    return lines;
  }

  asio::steady_timer wake;  // cancelled when the child has exited
  std::optional<ExitStatus> exit;
  std::vector<std::string> head;
  size_t head_bytes = 0;
  std::deque<std::string> tail;
  size_t line_count = 0;
};

// Waits until the child exits or `limit` passes; true when it exited. Throws when cancelled,
// after terminating the child's process group.
asio::awaitable<bool> WaitForExit(RunProbeState& state, ChildProcess& child, Duration limit) {
  if (state.exit) co_return true;
  state.wake.expires_after(limit);
  co_await state.wake.async_wait(kAsTuple);
  if (state.exit) co_return true;
  asio::cancellation_state cancellation = co_await asio::this_coro::cancellation_state;
  if (cancellation.cancelled() != asio::cancellation_type::none) {
    child.Terminate(kRunGrace);
    throw boost::system::system_error(asio::error::operation_aborted);
  }
  co_return false;
}

// Starts a probe's child; its exit is recorded in `state` and wakes WaitForExit().
Result<std::shared_ptr<ChildProcess>> StartProbeChild(asio::any_io_executor ex,
                                                      const SpawnOptions& options,
                                                      std::shared_ptr<RunProbeState> state,
                                                      ChildProcess::LineHandler on_line) {
  return ChildProcess::Start(ex, options, std::move(on_line), [state](const ExitStatus& status) {
    state->exit = status;
    state->wake.cancel();
  });
}

asio::awaitable<CheckOutcome> ProbeRun(const Check& check) {
  json::object evidence = BaseEvidence(check);
  auto ex = co_await asio::this_coro::executor;
  auto state = std::make_shared<RunProbeState>(ex);
  SpawnOptions options;
  options.argv = check.command.Argv();
  options.env = check.env;
  Result<std::shared_ptr<ChildProcess>> started =
      StartProbeChild(ex, options, state, [state](std::string_view line) { state->AddLine(line); });
  if (!started.ok()) {
    evidence["error"] = started.status().message();
    co_return Outcome(check, false, started.status().message(), std::move(evidence));
  }
  std::shared_ptr<ChildProcess> child = *started;

  bool exited = co_await WaitForExit(*state, *child, check.timeout);
  if (!exited) {
    child->Terminate(kRunGrace);
    // Reap it before reporting, so that the next attempt does not overlap with this one.
    co_await WaitForExit(*state, *child, kRunGrace + std::chrono::seconds(1));
  }

  json::array tail;
  for (const std::string& line : state->tail) tail.push_back(json::value(line));
  evidence["output_tail"] = std::move(tail);
  if (state->exit) {
    evidence["exit_status"] = state->exit->AsShellStatus();
    if (state->exit->signal) evidence["signal"] = state->exit->signal;
  }
  if (!exited) {
    std::string message = "timed out after " + FormatDuration(check.timeout);
    evidence["error"] = message;
    co_return Outcome(check, false, message, std::move(evidence));
  }
  if (!state->exit->ok())
    co_return Outcome(check, false, state->exit->ToString(), std::move(evidence));

  std::vector<std::string_view> lines = state->MatchLines();
  if (!check.output_matches.empty()) {
    bool matched = false;
    try {
      std::regex pattern = CompileOutputRegex(check.output_matches);
      for (std::string_view line : lines)
        if ((matched = std::regex_search(line.begin(), line.end(), pattern))) break;
    } catch (const std::regex_error&) {
      std::string message = "bad output_matches pattern '" + check.output_matches + "'";
      evidence["error"] = message;
      co_return Outcome(check, false, message, std::move(evidence));
    }
    if (!matched)
      co_return Outcome(check, false, "output does not match '" + check.output_matches + "'",
                        std::move(evidence));
  }
  if (!check.version_at_least.empty() || !check.version_below.empty()) {
    std::optional<std::string> version;
    for (std::string_view line : lines)
      if ((version = FindVersion(line))) break;
    if (!version) co_return Outcome(check, false, "no version in the output", std::move(evidence));
    evidence["version"] = *version;
    const std::string& low = check.version_at_least;
    const std::string& high = check.version_below;
    if (!low.empty() && CompareVersions(*version, low) < 0)
      co_return Outcome(check, false, "version " + *version + " is below " + low,
                        std::move(evidence));
    if (!high.empty() && CompareVersions(*version, high) >= 0)
      co_return Outcome(check, false, "version " + *version + " is not below " + high,
                        std::move(evidence));
    std::string range = !low.empty() ? " >= " + low : "";
    if (!high.empty()) range += (range.empty() ? " < " : ", < ") + high;
    co_return Outcome(check, true, "version " + *version + range, std::move(evidence));
  }
  co_return Outcome(check, true, state->exit->ToString(), std::move(evidence));
}

// service, process, gpus_free and a weights_complete with sha256 block (systemctl, /proc, NVML
// or nvidia-smi, hashing): they run in a child, `deployd --probe JSON` (builtin_action.h),
// which prints the outcome as one JSON line.
asio::awaitable<CheckOutcome> ProbeInChild(const Check& check) {
  json::object evidence = BaseEvidence(check);
  auto ex = co_await asio::this_coro::executor;
  auto state = std::make_shared<RunProbeState>(ex);
  auto output = std::make_shared<std::string>();
  SpawnOptions options;
  options.argv = {ProbeProgram(), std::string(kBuiltinProbeFlag), ProbeRequestJson(check)};
  Result<std::shared_ptr<ChildProcess>> started =
      StartProbeChild(ex, options, state, [output](std::string_view piece) { *output += piece; });
  if (!started.ok()) {
    evidence["error"] = started.status().message();
    co_return Outcome(check, false, started.status().message(), std::move(evidence));
  }
  std::shared_ptr<ChildProcess> child = *started;
  if (!co_await WaitForExit(*state, *child, check.timeout)) {
    child->Terminate(kRunGrace);
    co_await WaitForExit(*state, *child, kRunGrace + std::chrono::seconds(1));
    std::string message =
        "no answer within " + FormatDuration(check.timeout) + " (raise the check's 'timeout')";
    evidence["error"] = message;
    co_return Outcome(check, false, message, std::move(evidence));
  }
  boost::system::error_code ec;
  json::value parsed = json::parse(*output, ec);
  const json::object* answer = !ec && parsed.is_object() ? &parsed.as_object() : nullptr;
  const json::value* summary = answer ? answer->if_contains("summary") : nullptr;
  if (!summary || !summary->is_string()) {
    std::string message = "the probe gave no answer (" + state->exit->ToString() + ")";
    evidence["error"] = message;
    evidence["output"] = Excerpt(*output, kBodyExcerptBytes);
    co_return Outcome(check, false, message, std::move(evidence));
  }
  CheckOutcome outcome;
  outcome.passed = state->exit->ok();
  outcome.summary = std::string(summary->as_string());
  if (const json::value* e = answer->if_contains("evidence"); e && e->is_object())
    outcome.evidence = e->as_object();
  outcome.evidence["check"] = KindName(check.kind);
  if (!outcome.evidence.contains("target")) outcome.evidence["target"] = Target(check);
  co_return outcome;
}

}  // namespace

void SetProbeProgram(std::string program) { ProbeProgramRef() = std::move(program); }

std::string DescribeCheck(const Check& check) {
  std::string text = Subject(check);
  switch (check.kind) {
    case CheckKind::kRun:
      if (!check.output_matches.empty()) text += " matches '" + check.output_matches + "'";
      if (!check.version_at_least.empty()) text += " version >= " + check.version_at_least;
      if (!check.version_below.empty()) text += " version < " + check.version_below;
      break;
    case CheckKind::kHttp:
      if (check.status != 200) text += " status " + std::to_string(check.status);
      if (!check.body_contains.empty()) text += " containing '" + check.body_contains + "'";
      for (const JsonExpectation& x : check.json) text += ", json " + DescribeExpectation(x);
      break;
    case CheckKind::kFile:
      if (check.absent) {
        text += " absent";
      } else if (check.min_size) {
        text += " >= " + FormatSize(*check.min_size);
      }
      break;
    case CheckKind::kDiskFree:
      text += " >= " + FormatSize(check.at_least);
      break;
    case CheckKind::kService:
      text += " " + check.unit_state;
      if (check.enabled) text += *check.enabled ? ", enabled" : ", disabled";
      break;
    case CheckKind::kProcess:
      text += check.absent ? " absent" : " present";
      break;
    case CheckKind::kGpusFree:
      text += " (max used " + FormatSize(check.gpu.max_used) + ")";
      break;
    case CheckKind::kTcp:
    case CheckKind::kCommand:
    case CheckKind::kPortFree:
    case CheckKind::kWeightsComplete:
      break;
  }
  return text;
}

asio::awaitable<CheckOutcome> ProbeOnce(const Check& check) {
  auto start = Clock::now();
  CheckOutcome outcome;
  switch (check.kind) {
    case CheckKind::kRun:
      outcome = co_await ProbeRun(check);
      break;
    case CheckKind::kHttp:
      outcome = co_await ProbeHttp(check);
      break;
    case CheckKind::kTcp:
      outcome = co_await ProbeTcp(check);
      break;
    case CheckKind::kFile:
      outcome = ProbeFile(check);
      break;
    case CheckKind::kCommand:
      outcome = ProbeCommand(check);
      break;
    case CheckKind::kDiskFree:
      outcome = ProbeDiskFree(check);
      break;
    case CheckKind::kPortFree:
      outcome = ProbePortFree(check);
      break;
    case CheckKind::kWeightsComplete:
      // Hashing hundreds of GB must not hold the daemon's thread; sizes alone are quick.
      // (Not a conditional expression: GCC 12 miscompiles co_await inside one.)
      if (check.sha256.empty()) {
        outcome = ProbeWeights(check);
      } else {
        outcome = co_await ProbeInChild(check);
      }
      break;
    case CheckKind::kService:
    case CheckKind::kProcess:
    case CheckKind::kGpusFree:
      outcome = co_await ProbeInChild(check);
      break;
  }
  // A network probe that was cancelled returns an error like any other; it must not pass for
  // the check's failure.
  co_await ThrowIfCancelled();
  outcome.attempts = 1;
  outcome.evidence["elapsed_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  co_return outcome;
}

asio::awaitable<CheckOutcome> RunCheck(const Check& check) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  if (check.after.count() > 0) {
    timer.expires_after(check.after);
    co_await timer.async_wait(asio::use_awaitable);
  }
  auto deadline = Clock::now() + check.within.value_or(Duration(0));
  int attempts = 0;
  while (true) {
    CheckOutcome outcome = co_await ProbeOnce(check);
    outcome.attempts = ++attempts;
    auto now = Clock::now();
    if (outcome.passed || !check.within || now >= deadline) co_return outcome;
    // The last try is made at the deadline itself rather than one `every` short of it.
    timer.expires_at(std::min(now + check.every, deadline));
    co_await timer.async_wait(asio::use_awaitable);
  }
}

}  // namespace deployd
