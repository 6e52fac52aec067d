// MetricsHttpServer: `/metrics` over HTTP for Prometheus to scrape (`metrics_listen:` in
// deployd.yaml), on the daemon's io_context with Boost.Beast: one listener coroutine and one
// coroutine per connection, as the control socket has. GET or HEAD /metrics answers the text
// exposition (metrics_report.h), rendered afresh; another path is 404, another method 405.
// The work is bounded: at most kMaxConnections at once (more are closed at once), requests of
// at most 8 KiB of header and no body, and kIdleTimeout for a request to arrive, so a client
// that connects and says nothing, or a flood, holds nothing for long. The address is the
// configuration's (loopback unless the operator allowed otherwise, daemon_config.h).
//
// One thread: the daemon's io_context.
#ifndef DEPLOYD_CONTROL_METRICS_HTTP_H_
#define DEPLOYD_CONTROL_METRICS_HTTP_H_

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "deployd/status.h"
#include "util/listen_address.h"

namespace deployd {

class MetricsHttpServer {
 public:
  static constexpr size_t kMaxConnections = 8;
  static constexpr std::chrono::seconds kIdleTimeout{10};

  // The exposition text, rendered now; an error is answered 503 with its message.
  using Render = std::function<Result<std::string>()>;

  MetricsHttpServer(boost::asio::io_context& io, Render render);
  ~MetricsHttpServer();

  // Binds and listens: "cannot listen for metrics on 127.0.0.1:9464: Address already in use".
  Status Listen(const ListenAddress& address);
  // Closes the listener and every connection.
  void Stop();

  // The listener, its connections and what renders: shared with their coroutines, which may
  // outlive the server by a completion.
  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_METRICS_HTTP_H_
