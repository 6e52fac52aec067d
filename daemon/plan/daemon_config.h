// DaemonConfig: deployd's settings, from config/deployd.yaml (or --config) and the command
// line. Every key is optional; an unknown key or a bad value is an error with its position.
#ifndef DEPLOYD_PLAN_DAEMON_CONFIG_H_
#define DEPLOYD_PLAN_DAEMON_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "deployd/plan.h"
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

// Root: /run/deployd/deployd.sock; others: $XDG_RUNTIME_DIR/deployd/deployd.sock, else
// /tmp/deployd-UID/deployd.sock. deployctl uses the same rule.
std::string DefaultSocketPath();
// Root: /var/lib/deployd; others: $XDG_STATE_HOME/deployd, else ~/.local/state/deployd.
std::string DefaultStateDir();

// Reads `path` over `config` (which holds the defaults). Problems are appended to `errors`.
void LoadDaemonConfig(const std::string& path, DaemonConfig& config,
                      std::vector<Diagnostic>& errors);

}  // namespace deployd

#endif  // DEPLOYD_PLAN_DAEMON_CONFIG_H_
