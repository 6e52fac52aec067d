// SshTransport: deployctl reaching the deployd of another host through the system's OpenSSH
// client, never a protocol of our own. `ssh HOST deployctl dial-stdio` runs the host's
// deployctl, which joins its stdin and stdout to the host's socket (dial_stdio.h), so the same
// NDJSON protocol flows through ssh, and the host's SO_PEERCRED rule decides who is served:
// the ssh user must be root or in deployd's group there. Everything operators already set up
// for ssh (config, agent, known_hosts, ProxyJump) applies; DEPLOYD_SSH_COMMAND replaces the
// `ssh` program (a shell command line, as GIT_SSH_COMMAND).
//
// Connections are reused: a ControlMaster per host in a private directory
// ($XDG_RUNTIME_DIR/deployctl-ssh, else /tmp/deployctl-ssh-UID, mode 0700, ours), persisting
// 60 s after the last use (SshMode::share).
//
// When a connection ends, the reason is told by the layer it failed at: ssh could not connect
// (its own message), no deployctl on the host, deployd not running there, permission denied
// there (the last two arrive as a refusal line from dial-stdio or the daemon, see Refusal()).
//
// Single-threaded; the child is ssh, in deployctl's process group (Ctrl-C ends both).
#ifndef DEPLOYD_CTL_SSH_TRANSPORT_H_
#define DEPLOYD_CTL_SSH_TRANSPORT_H_

#include <sys/types.h>

#include <boost/json/object.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/status.h"

namespace deployd::ctl {

// ssh://[USER@]HOST[:PORT]
struct SshTarget {
  std::string user;  // "" = ssh's own choice (its config, else the local user)
  std::string host;  // a name, an address, or an alias of ~/.ssh/config; IPv6 without brackets
  int port = 0;      // 0 = ssh's own choice
  // As written back: "ssh://root@gpu1:2222" (brackets around an IPv6 address).
  std::string Url() const;
};

// Parses --host / DEPLOYD_HOST / an inventory's address; the error is one line for humans.
Result<SshTarget> ParseSshUrl(std::string_view url);

// The host every Client of this deployctl connects to (--host, DEPLOYD_HOST), with the socket
// to ask for there ("" = the host's default), or none: the local socket. Set once by main().
void UseRemoteHost(std::optional<SshTarget> host, std::string remote_socket);
// The same from the command line: `flag` is --host as given ("": $DEPLOYD_HOST, else local),
// `socket_flag` --socket as given. Dies (exit 2) on an address that is not ssh://….
void ChooseRemoteHost(const std::string& flag, const std::string& socket_flag);
const SshTarget* RemoteHost();
const std::string& RemoteSocket();

// How a connection is made: `batch` (rollouts) never prompts for a passphrase or a host key
// and gives up on a dead link sooner; otherwise ssh may ask on the terminal. `share`: through
// the host's ControlMaster, made if there is none. A rollout's step keeps one connection per
// host for its whole life and its processes end with it, so it has nothing to share.
struct SshMode {
  bool batch = false;
  bool share = true;
};

// The argv that runs `deployctl [--socket S] dial-stdio` on `target`.
std::vector<std::string> SshArgv(const SshTarget& target, const std::string& remote_socket,
                                 SshMode mode);

// One ssh child with its stdin and stdout joined to fd() (a stream socket; its other end is
// ssh's), its stderr kept in an unlinked file for Explain().
class SshChannel {
 public:
  // Starts ssh; fails only when it cannot be started at all.
  static Result<std::unique_ptr<SshChannel>> Start(const SshTarget& target,
                                                   const std::string& remote_socket, SshMode mode);
  // Closes the connection and ends ssh (SIGTERM when it has not ended by itself), reaped.
  ~SshChannel();
  SshChannel(const SshChannel&) = delete;
  SshChannel& operator=(const SshChannel&) = delete;

  int fd() const { return fd_; }
  const SshTarget& target() const { return target_; }

  // Why the connection ended (after EOF on fd()): waits a moment for ssh to exit, then names
  // the layer by its exit status and what it printed. `connected`: deployd had answered over
  // it, so ssh failing now is a lost connection, not one that could not be made.
  std::string Explain(bool connected);
  // ssh's exit status (128 + N for signal N), once Explain() has seen it.
  std::optional<int> exit_code() const { return exit_code_; }

 private:
  SshChannel(SshTarget target, int fd, pid_t pid, int err_fd)
      : target_(std::move(target)), fd_(fd), pid_(pid), err_fd_(err_fd) {}
  std::optional<int> WaitExit(int timeout_ms);
  std::string StderrTail();

  SshTarget target_;
  int fd_;
  pid_t pid_;
  int err_fd_;
  std::optional<int> exit_code_;  // once reaped
};

// The message for a refusal line that came back through ssh, naming the layer: "deployd is not
// running on ssh://h1: …" (dial-stdio's "unreachable"), "permission denied on ssh://h1: …"
// (dial-stdio's or the daemon's "unauthorized"); nullopt for another refusal.
std::optional<std::string> Refusal(const SshTarget& target, const boost::json::object& answer);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_SSH_TRANSPORT_H_
