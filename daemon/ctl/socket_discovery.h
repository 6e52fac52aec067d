// Where deployctl finds the deployd of this host: the first of
//   1. --socket PATH
//   2. $DEPLOYD_SOCKET
//   3. the `socket:` of deployd's configuration file: --config FILE, else
//      /etc/deployd/deployd.yaml when this user may read it
//   4. the system daemon's socket, /run/deployd/deployd.sock, when this user can connect to
//      it (root, and the members of deployd's group, can)
//   5. this user's own daemon's socket: $XDG_RUNTIME_DIR/deployd/deployd.sock, else
//      /tmp/deployd-UID/deployd.sock, used only while /tmp/deployd-UID is this user's own
//      (CheckUserSocketDir)
// so that a member of deployd's group reaches the system daemon without options, and a user
// with a daemon of their own reaches theirs. Blocking: reads the file, tries one connect(2).
#ifndef DEPLOYD_CTL_SOCKET_DISCOVERY_H_
#define DEPLOYD_CTL_SOCKET_DISCOVERY_H_

#include <string>

#include "ctl/ctl_client.h"

namespace deployd::ctl {

// Ends deployctl with exit status 2 when --config names a file that cannot be read, or the
// file read is invalid (each problem on stderr first); with exit status 3 when the per-user
// socket's directory is not this user's own.
SocketChoice DiscoverSocket(const std::string& socket_flag, const std::string& config_flag);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_SOCKET_DISCOVERY_H_
