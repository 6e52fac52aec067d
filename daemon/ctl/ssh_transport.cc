#include "ctl/ssh_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "ctl/ctl_client.h"
#include "deployd/protocol.h"

extern char** environ;

namespace deployd::ctl {

namespace json = boost::json;

namespace {

constexpr std::string_view kScheme = "ssh://";
constexpr int kExitWaitMs = 5000;

std::optional<SshTarget>& ChosenHost() {
  static std::optional<SshTarget> host;
  return host;
}

std::string& ChosenSocket() {
  static std::string socket;
  return socket;
}

bool Printable(std::string_view s) {
  for (unsigned char c : s)
    if (c <= ' ' || c == 0x7f || c == '/' || c == '\\' || c == '\'' || c == '"') return false;
  return true;
}

// A shell word for the remote command line, which ssh hands to the user's shell there.
std::string ShellWord(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The ControlPath directory, or "" when no safe one can be had (then no connection reuse).
std::string ControlDir() {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  std::string dir = runtime && *runtime ? std::string(runtime) + "/deployctl-ssh"
                                        : "/tmp/deployctl-ssh-" + std::to_string(::getuid());
  if (::mkdir(dir.c_str(), 0700) < 0 && errno != EEXIST) return "";
  struct stat st {};
  // Someone else's directory (or a link to one) would let them take over our connections.
  if (::lstat(dir.c_str(), &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::getuid() ||
      (st.st_mode & 077) != 0)
    return "";
  return dir;
}

// The last line ssh (or the remote deployctl) printed that says what went wrong: not one of
// ssh's notes about how it connected.
std::string LastLine(const std::string& text) {
  std::string last;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(start, end - start);
    start = end + 1;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
    if (line.empty() || line.find("disabling multiplexing") != std::string::npos ||
        line.starts_with("Warning: Permanently added"))
      continue;
    last = line;
  }
  constexpr std::string_view kPrefix = "deployctl: error: ";
  if (last.starts_with(kPrefix)) last.erase(0, kPrefix.size());
  return last;
}

}  // namespace

std::string SshTarget::Url() const {
  std::string url(kScheme);
  if (!user.empty()) url += user + "@";
  url += host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port) url += ":" + std::to_string(port);
  return url;
}

Result<SshTarget> ParseSshUrl(std::string_view url) {
  auto bad = [&](const std::string& why) {
    return Status::Error("'" + std::string(url) + "' is not an ssh address (" + why +
                         "; expected ssh://[USER@]HOST[:PORT])");
  };
  if (!url.starts_with(kScheme)) return bad("it must start with ssh://");
  std::string_view rest = url.substr(kScheme.size());
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  SshTarget t;
  if (size_t at = rest.rfind('@'); at != std::string_view::npos) {
    t.user = std::string(rest.substr(0, at));
    rest.remove_prefix(at + 1);
    if (t.user.empty() || !Printable(t.user) || t.user.front() == '-')
      return bad("the user name is empty or holds spaces, quotes or slashes");
  }
  std::string_view port;
  if (rest.starts_with("[")) {
    size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad("no ']' after the IPv6 address");
    t.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!rest.empty() && rest.front() != ':') return bad("a path is not allowed");
    if (!rest.empty()) port = rest.substr(1);
  } else {
    size_t colon = rest.find(':');
    t.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port = rest.substr(colon + 1);
  }
  if (t.host.empty()) return bad("no host");
  if (t.host.find('/') != std::string::npos) return bad("a path is not allowed");
  if (t.host.front() == '-' || !Printable(t.host)) return bad("the host holds odd characters");
  if (port.data()) {
    int value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value < 1 || value > 65535)
      return bad("the port must be a number from 1 to 65535");
    t.port = value;
  }
  return t;
}

void UseRemoteHost(std::optional<SshTarget> host, std::string remote_socket) {
  ChosenHost() = std::move(host);
  ChosenSocket() = std::move(remote_socket);
}

void ChooseRemoteHost(const std::string& flag, const std::string& socket_flag) {
  std::string url = flag;
  if (url.empty()) {
    const char* env = std::getenv("DEPLOYD_HOST");
    url = env ? env : "";
  }
  if (url.empty()) return UseRemoteHost(std::nullopt, "");
  Result<SshTarget> target = ParseSshUrl(url);
  if (!target.ok())
    Die(kExitUsage, (flag.empty() ? "$DEPLOYD_HOST: " : "--host: ") + target.status().message());
  UseRemoteHost(target.value(), socket_flag);
}

const SshTarget* RemoteHost() { return ChosenHost() ? &*ChosenHost() : nullptr; }

const std::string& RemoteSocket() { return ChosenSocket(); }

std::vector<std::string> SshArgv(const SshTarget& target, const std::string& remote_socket,
                                 SshMode mode) {
  std::vector<std::string> argv;
  const char* command = std::getenv("DEPLOYD_SSH_COMMAND");
  if (command && *command) {
    argv = {"/bin/sh", "-c", std::string(command) + " \"$@\"", "ssh"};
  } else {
    argv = {"ssh"};
  }
  auto option = [&](const std::string& o) {
    argv.push_back("-o");
    argv.push_back(o);
  };
  argv.push_back("-T");
  if (!mode.share) {
    option("ControlMaster=no");
    option("ControlPath=none");
  } else if (std::string dir = ControlDir(); !dir.empty()) {
    option("ControlMaster=auto");
    option("ControlPath=" + dir + "/%C");
    option("ControlPersist=60s");
  }
  // A link that went dead is noticed by ssh's keepalives, not only when TCP gives up.
  option(mode.batch ? "ServerAliveInterval=5" : "ServerAliveInterval=15");
  option("ServerAliveCountMax=3");
  option("ConnectTimeout=15");
  if (mode.batch) option("BatchMode=yes");
  if (!target.user.empty()) {
    argv.push_back("-l");
    argv.push_back(target.user);
  }
  if (target.port) {
    argv.push_back("-p");
    argv.push_back(std::to_string(target.port));
  }
  argv.push_back("--");
  argv.push_back(target.host);
  std::string remote = "deployctl";
  if (!remote_socket.empty()) remote += " --socket " + ShellWord(remote_socket);
  argv.push_back(remote + " dial-stdio");
  return argv;
}

Result<std::unique_ptr<SshChannel>> SshChannel::Start(const SshTarget& target,
                                                      const std::string& remote_socket,
                                                      SshMode mode) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
    return Status::Error(std::string("socketpair: ") + std::strerror(errno));
  int err = ::memfd_create("ssh-stderr", MFD_CLOEXEC);
  if (err < 0) {
    int e = errno;
    ::close(sv[0]);
    ::close(sv[1]);
    return Status::Error(std::string("memfd_create: ") + std::strerror(e));
  }
  std::vector<std::string> args = SshArgv(target, remote_socket, mode);
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, sv[1], 0);
  posix_spawn_file_actions_adddup2(&actions, sv[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err, 2);
  pid_t pid = 0;
  int rc = ::posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    ::close(err);
    return Status::Error("cannot start " + args[0] + ": " + std::strerror(rc) +
                         " (deployctl reaches other hosts with OpenSSH's client: apt-get install "
                         "openssh-client)");
  }
  return std::unique_ptr<SshChannel>(new SshChannel(target, sv[0], pid, err));
}

SshChannel::~SshChannel() {
  ::close(fd_);
  if (!exit_code_) {
    ::kill(pid_, SIGTERM);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
  ::close(err_fd_);
}

// The exit status as a shell reports it (128 + N for signal N), once ssh has exited within
// `timeout_ms`; waited for on a pidfd, not by polling.
std::optional<int> SshChannel::WaitExit(int timeout_ms) {
  if (exit_code_) return exit_code_;
  int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0));
  if (pidfd >= 0) {
    pollfd pfd{pidfd, POLLIN, 0};
    while (::poll(&pfd, 1, timeout_ms) < 0 && errno == EINTR) {
    }
    ::close(pidfd);
  }
  int status = 0;
  pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r != pid_) return std::nullopt;
  exit_code_ = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
  return exit_code_;
}

std::string SshChannel::StderrTail() {
  constexpr off_t kTail = 4096;
  off_t size = ::lseek(err_fd_, 0, SEEK_END);
  if (size <= 0) return "";
  off_t start = size > kTail ? size - kTail : 0;
  std::string text(static_cast<size_t>(size - start), '\0');
  ssize_t n = ::pread(err_fd_, text.data(), text.size(), start);
  text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  return text;
}

std::string SshChannel::Explain(bool connected) {
  const std::string url = target_.Url();
  std::optional<int> code = WaitExit(kExitWaitMs);
  std::string said = LastLine(StderrTail());
  auto with = [&](const std::string& text) { return said.empty() ? text : text + ": " + said; };
  if (!code) return "ssh to " + url + " did not end after the connection closed";
  switch (*code) {
    case 255:
      return connected ? with("lost the connection to deployd on " + url + " (ssh)")
                       : with("ssh could not connect to " + url);
    case 127:
      return with("no deployctl on " + url) +
             " (install deployd there: its deployctl must be on the PATH of ssh sessions)";
    case 126:
      return with("deployctl on " + url + " cannot be run");
    case 2:
      return with("deployctl on " + url + " does not know dial-stdio (an older deployd?)");
    case 0:
      return "deployd on " + url + " closed the connection";
    default:
      if (*code > 128)
        return "ssh to " + url + " was killed by signal " + std::to_string(*code - 128);
      return with("ssh to " + url + " ended with exit status " + std::to_string(*code));
  }
}

std::optional<std::string> Refusal(const SshTarget& target, const json::object& answer) {
  const json::value* code = answer.if_contains("code");
  const json::value* error = answer.if_contains("error");
  std::string message = error && error->is_string() ? std::string(error->as_string()) : "";
  if (code && *code == "unreachable")
    return "deployd is not running on " + target.Url() + ": " + message;
  if (code && *code == "unauthorized") {
    constexpr std::string_view kPrefix = "permission denied: ";
    if (message.starts_with(kPrefix)) message.erase(0, kPrefix.size());
    return "permission denied on " + target.Url() + ": " + message +
           " (the ssh user must be root or in deployd's group there)";
  }
  return std::nullopt;
}

}  // namespace deployd::ctl
