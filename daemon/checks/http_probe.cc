#include "checks/http_probe.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <charconv>
#include <variant>

#include "util/units.h"

namespace deployd {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using asio::ip::tcp;
using boost::system::error_code;
using namespace asio::experimental::awaitable_operators;

constexpr auto kUseAwaitable = asio::as_tuple(asio::use_awaitable);
// A health or readiness endpoint answers with a few bytes; a body past this is an error
// rather than a reason to hold gigabytes in memory.
constexpr std::uint64_t kMaxBody = 4u << 20;

// Messages read like the rest of a summary ("connection refused", not "Connection refused").
std::string ErrorText(const error_code& ec) {
  if (ec == asio::error::connection_refused) return "connection refused";
  if (ec == http::error::end_of_stream || ec == asio::error::eof)
    return "connection closed without a response";
  if (ec == http::error::body_limit) return "response body larger than 4MiB";
  std::string text = ec.message();
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

// Resolves and connects; the socket is open on success.
asio::awaitable<Status> Connect(tcp::socket& socket, const std::string& host, int port) {
  auto ex = co_await asio::this_coro::executor;
  tcp::resolver resolver(ex);
  auto [resolve_ec, endpoints] =
      co_await resolver.async_resolve(host, std::to_string(port), kUseAwaitable);
  if (resolve_ec) co_return Status::Error("cannot resolve " + host + ": " + ErrorText(resolve_ec));
  auto [connect_ec, endpoint] = co_await asio::async_connect(socket, endpoints, kUseAwaitable);
  if (connect_ec) co_return Status::Error(ErrorText(connect_ec));
  co_return Status::Ok();
}

asio::awaitable<Result<HttpResponse>> Exchange(const HttpRequest& request, const HttpUrl& url) {
  auto ex = co_await asio::this_coro::executor;
  tcp::socket socket(ex);
  Status connected = co_await Connect(socket, url.host, url.port);
  if (!connected.ok()) co_return connected;

  http::request<http::string_body> req(
      request.method == "POST" ? http::verb::post : http::verb::get, url.target, 11);
  std::string host = url.host.find(':') == std::string::npos ? url.host : "[" + url.host + "]";
  if (url.port != 80) host += ":" + std::to_string(url.port);
  req.set(http::field::host, host);
  req.set(http::field::user_agent, "deployd/" DEPLOYD_VERSION);
  req.set(http::field::connection, "close");
  if (request.method == "POST" || !request.body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = request.body;
  }
  req.prepare_payload();
  auto [write_ec, written] = co_await http::async_write(socket, req, kUseAwaitable);
  if (write_ec) co_return Status::Error(ErrorText(write_ec));

  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  // A large answer (a model file, say) still has a status, and its start can be searched: read
  // at most kMaxBody bytes of the body, then stop.
  parser.body_limit(boost::none);
  bool too_large = false;
  while (!parser.is_done()) {
    auto [read_ec, read] = co_await http::async_read_some(socket, buffer, parser, kUseAwaitable);
    if (read_ec) co_return Status::Error(ErrorText(read_ec));
    if (parser.is_header_done() && parser.get().body().size() >= kMaxBody) {
      too_large = !parser.is_done();
      break;
    }
  }
  if (too_large) {
    HttpResponse response;
    response.status = static_cast<int>(parser.get().result_int());
    response.body = std::move(parser.get().body());
    response.body.resize(kMaxBody);
    response.body_too_large = true;
    co_return response;
  }
  error_code ignored;
  socket.shutdown(tcp::socket::shutdown_both, ignored);
  HttpResponse response;
  response.status = static_cast<int>(parser.get().result_int());
  response.body = std::move(parser.get().body());
  co_return response;
}

asio::awaitable<Status> ConnectOnly(std::string host, int port) {
  auto ex = co_await asio::this_coro::executor;
  tcp::socket socket(ex);
  co_return co_await Connect(socket, host, port);
}

// Completes when `timeout` has passed; completes early, with no harm done, when cancelled
// because the other branch of `||` won.
asio::awaitable<void> Deadline(Duration timeout) {
  asio::steady_timer timer(co_await asio::this_coro::executor, timeout);
  co_await timer.async_wait(kUseAwaitable);
}

}  // namespace

std::string NetworkErrorText(const error_code& ec) { return ErrorText(ec); }

Result<HttpUrl> ParseHttpUrl(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme)
    return Status::Error("'" + std::string(url) + "' is not an http:// URL");
  std::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find_first_of("/?");
  std::string_view authority = rest.substr(0, slash);
  HttpUrl parsed;
  parsed.target = slash == std::string_view::npos ? "/" : std::string(rest.substr(slash));
  if (parsed.target[0] == '?') parsed.target.insert(0, "/");
  if (authority.find('@') != std::string_view::npos)
    return Status::Error("'" + std::string(url) + "': user info is not supported");

  std::string_view port_text;
  if (!authority.empty() && authority[0] == '[') {  // [::1]:8000
    size_t close = authority.find(']');
    if (close == std::string_view::npos)
      return Status::Error("'" + std::string(url) + "': unterminated IPv6 address");
    parsed.host = std::string(authority.substr(1, close - 1));
    std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Status::Error("'" + std::string(url) + "': bad host");
      port_text = after.substr(1);
    }
  } else {
    size_t colon = authority.rfind(':');
    parsed.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (parsed.host.empty()) return Status::Error("'" + std::string(url) + "': no host");
  if (!port_text.empty()) {
    int port = 0;
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port < 1 || port > 65535)
      return Status::Error("'" + std::string(url) + "': bad port '" + std::string(port_text) + "'");
    parsed.port = port;
  }
  return parsed;
}

asio::awaitable<Result<HttpResponse>> HttpProbe(const HttpRequest& request) {
  Result<HttpUrl> url = ParseHttpUrl(request.url);
  if (!url.ok()) co_return url.status();
  auto outcome = co_await (Exchange(request, *url) || Deadline(request.timeout));
  if (outcome.index() == 1)
    co_return Status::Error("timed out after " + FormatDuration(request.timeout));
  co_return std::move(std::get<0>(outcome));
}

asio::awaitable<Status> TcpProbe(const std::string& host, int port, Duration timeout) {
  auto outcome = co_await (ConnectOnly(host, port) || Deadline(timeout));
  if (outcome.index() == 1) co_return Status::Error("timed out after " + FormatDuration(timeout));
  co_return std::move(std::get<0>(outcome));
}

}  // namespace deployd
