// ControlServer: the daemon's Unix socket (DESIGN.md §3). One listener coroutine and one
// coroutine per connection on the daemon's io_context; requests are newline-delimited JSON
// (include/deployd/protocol.h), at most kMaxRequestBytes a line. Each connection's peer is
// identified with SO_PEERCRED and only root, the daemon's own uid and members of the
// configured group are served. What each request means is the handlers' (request_handlers.h,
// answer_streams.h); the server reads lines, hands them over and writes what comes back.
#ifndef DEPLOYD_CONTROL_CONTROL_SERVER_H_
#define DEPLOYD_CONTROL_CONTROL_SERVER_H_

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "deployd/status.h"
#include "engine/run_manager.h"
#include "store/run_store.h"

namespace deployd {

struct ControlServerOptions {
  std::string socket_path;
  std::optional<gid_t> group;  // members may control the daemon; the socket gets this group
};

class ControlServer {
 public:
  ControlServer(boost::asio::io_context& io, RunManager& runs, RunStore& store,
                ControlServerOptions options);
  ~ControlServer();

  // Binds the socket (mode 0660). Refuses when another daemon answers on the path.
  Status Listen();
  // Closes the listener and every connection.
  void Stop();

  class Session;

 private:
  void Accept();
  bool Authorized(uid_t uid, gid_t gid) const;

  boost::asio::io_context& io_;
  RunManager& runs_;
  RunStore& store_;
  ControlServerOptions options_;
  struct Acceptor;
  std::unique_ptr<Acceptor> acceptor_;
  std::set<std::shared_ptr<Session>> sessions_;
};

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_CONTROL_SERVER_H_
