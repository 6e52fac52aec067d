// `deployctl dial-stdio`: run by ssh on a host (ssh_transport.h), it joins its stdin and
// stdout to that host's deployd socket, as `docker system dial-stdio` does, so the client at the
// other end of ssh speaks the protocol as if it were local. The daemon sees this process as its
// peer: its SO_PEERCRED rule applies to the ssh user.
//
// When the socket cannot be reached it answers with one refusal line (protocol.h) whose "code"
// names why — "unreachable" (nothing listens) or "unauthorized" (this user may not use it) —
// also says it on stderr, and exits 3; the client turns that into a message naming the host.
#ifndef DEPLOYD_CTL_DIAL_STDIO_H_
#define DEPLOYD_CTL_DIAL_STDIO_H_

#include <string>

namespace deployd::ctl {

// Relays until deployd closes the connection (0), or until stdin ends and deployd has then
// said all it had to say. Blocking; one thread.
int DialStdio(const std::string& socket_path);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_DIAL_STDIO_H_
