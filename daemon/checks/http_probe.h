// Network probes for checks: one HTTP/1.1 request (Boost.Beast) and one TCP connect, each
// bounded by a deadline. Kept apart from network_probes.cc so that Beast's headers are compiled in
// this one translation unit.
//
// Runs on the caller's executor (the daemon's one thread). Failures are values: a Status whose
// message is ready for a check's summary ("connection refused", "timed out after 10s"). When
// the awaiting coroutine is cancelled, the pending operation is abandoned and an error comes
// back at once.
#ifndef DEPLOYD_CHECKS_HTTP_PROBE_H_
#define DEPLOYD_CHECKS_HTTP_PROBE_H_

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <string>
#include <string_view>

#include "deployd/plan.h"
#include "deployd/status.h"

namespace deployd {

// http://host[:port]/path, split. `target` is the path with its query, "/" when none.
struct HttpUrl {
  std::string host;  // without brackets for an IPv6 literal
  int port = 80;
  std::string target;
};
Result<HttpUrl> ParseHttpUrl(std::string_view url);

struct HttpRequest {
  std::string method = "GET";
  std::string url;
  std::string body;  // sent as application/json when not empty or when method is POST
  Duration timeout{std::chrono::seconds(10)};
};

struct HttpResponse {
  int status = 0;
  std::string body;  // at most kMaxBody bytes are read
  // The body was larger than kMaxBody: the status is known, `body` holds its first kMaxBody
  // bytes.
  bool body_too_large = false;
};

// Resolves, connects, sends, reads the response; all within request.timeout.
boost::asio::awaitable<Result<HttpResponse>> HttpProbe(const HttpRequest& request);

// A network error as a summary says it: "connection refused", "connection closed without a
// response", "connection reset by peer".
std::string NetworkErrorText(const boost::system::error_code& ec);

// Resolves and connects to host:port within `timeout`, then closes the connection.
boost::asio::awaitable<Status> TcpProbe(const std::string& host, int port, Duration timeout);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_HTTP_PROBE_H_
