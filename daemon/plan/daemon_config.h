// DaemonConfig: deployd's settings, from config/deployd.yaml (or --config) and the command
// line. Every key is optional; an unknown key or a bad value is an error with its position.
#ifndef DEPLOYD_PLAN_DAEMON_CONFIG_H_
#define DEPLOYD_PLAN_DAEMON_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deployd/plan.h"
#include "deployd/status.h"
#include "plan/diagnostic.h"
#include "util/listen_address.h"

namespace deployd {

struct DaemonConfig {
  std::string socket_path;  // default: DefaultSocketPath()
  std::string state_dir;    // default: DefaultStateDir()
  std::string group;        // members may use the socket; "" = root and the daemon's uid only
  std::uint64_t log_max_size = 64ull << 20;      // per step log, before it is rotated once
  std::optional<Duration> retention;             // forget finished runs older than this
  std::string unit_dir = "/etc/systemd/system";  // where `service` steps write unit files
  std::vector<std::string> allowed_roots;        // `remove` deletes only under these
  // Prometheus: a node_exporter textfile deployd keeps up to date, "" = none; an HTTP endpoint
  // (`/metrics`), none by default, on a loopback address unless metrics_allow_remote.
  std::string metrics_textfile;
  std::optional<ListenAddress> metrics_listen;
  bool metrics_allow_remote = false;
};

// The system daemon's socket (root's default), and its configuration file.
inline constexpr const char* kSystemSocketPath = "/run/deployd/deployd.sock";
inline constexpr const char* kSystemConfigPath = "/etc/deployd/deployd.yaml";

// Root: kSystemSocketPath; others: UserSocketPath().
std::string DefaultSocketPath();
// A user's own daemon's socket: $XDG_RUNTIME_DIR/deployd/deployd.sock, else
// /tmp/deployd-UID/deployd.sock (UID: the effective uid).
std::string UserSocketPath();
// In /tmp, which every user may write to, another user could make /tmp/deployd-UID first and
// so own the socket's directory: a socket there is used only while that directory is this
// user's own, a real directory of mode 0700. For `socket_path` in /tmp/deployd-UID: the
// directory is made so when `create` and it is not there; else it is checked, and an error
// says what is wrong and what to set instead. Ok for every other path. Blocking (a few
// system calls).
Status CheckUserSocketDir(const std::string& socket_path, bool create);
// Root: /var/lib/deployd; others: $XDG_STATE_HOME/deployd, else ~/.local/state/deployd.
std::string DefaultStateDir();

// Reads `path` over `config` (which holds the defaults). Problems are appended to `errors`.
void LoadDaemonConfig(const std::string& path, DaemonConfig& config,
                      std::vector<Diagnostic>& errors);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_DAEMON_CONFIG_H_
