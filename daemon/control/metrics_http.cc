#include "control/metrics_http.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <set>

#include "protocol/metrics_exposition.h"

namespace deployd {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using asio::ip::tcp;

namespace {

constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);
constexpr std::uint32_t kMaxHeader = 8 * 1024;

using Response = http::response<http::string_body>;

Response Plain(http::status status, std::string body) {
  Response res{status, 11};
  res.set(http::field::content_type, "text/plain; charset=utf-8");
  res.body() = std::move(body);
  return res;
}

Response Respond(const http::request<http::empty_body>& req,
                 const MetricsHttpServer::Render& render) {
  std::string_view target = req.target();
  target = target.substr(0, target.find('?'));
  const bool head = req.method() == http::verb::head;
  Response res;
  if (target != "/metrics") {
    res = Plain(http::status::not_found, "deployd serves its metrics at /metrics\n");
  } else if (req.method() != http::verb::get && !head) {
    res = Plain(http::status::method_not_allowed, "/metrics answers GET and HEAD\n");
    res.set(http::field::allow, "GET, HEAD");
  } else if (Result<std::string> text = render(); !text.ok()) {
    res = Plain(http::status::service_unavailable, text.status().message() + "\n");
  } else {
    res = Plain(http::status::ok, std::move(text.value()));
    res.set(http::field::content_type, kExpositionContentType);
  }
  res.version(req.version());
  res.keep_alive(req.keep_alive());
  res.set(http::field::server, "deployd/" DEPLOYD_VERSION);
  res.prepare_payload();
  if (head) res.body().clear();  // the Content-Length of the GET stays
  return res;
}

}  // namespace

struct MetricsHttpServer::State {
  State(asio::io_context& io, Render render) : io(io), acceptor(io), render(std::move(render)) {}
  asio::io_context& io;
  tcp::acceptor acceptor;
  Render render;
  std::set<std::shared_ptr<beast::tcp_stream>> connections;
};

namespace {

using State = std::shared_ptr<MetricsHttpServer::State>;

// Requests one after the other on one connection, until the client closes it, asks to, or
// says nothing for kIdleTimeout.
asio::awaitable<void> Serve(State state, std::shared_ptr<beast::tcp_stream> stream) {
  beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::empty_body> parser;
    parser.header_limit(kMaxHeader);
    stream->expires_after(MetricsHttpServer::kIdleTimeout);
    auto [read_ec, read] = co_await http::async_read(*stream, buffer, parser, kTuple);
    if (read_ec) break;
    Response response = Respond(parser.get(), state->render);
    stream->expires_after(MetricsHttpServer::kIdleTimeout);
    auto [write_ec, written] = co_await http::async_write(*stream, response, kTuple);
    if (write_ec || !response.keep_alive()) break;
  }
  beast::error_code ignored;
  stream->socket().shutdown(tcp::socket::shutdown_send, ignored);
  stream->close();
}

asio::awaitable<void> Accept(State state) {
  asio::steady_timer pause(state->io);
  for (;;) {
    auto [ec, socket] = co_await state->acceptor.async_accept(kTuple);
    if (ec == asio::error::operation_aborted || !state->acceptor.is_open()) co_return;
    if (ec) {
      // Out of descriptors, say: accepting again at once would fail again at once.
      spdlog::warn("metrics_listen: cannot accept a connection: {}", ec.message());
      pause.expires_after(std::chrono::milliseconds(100));
      co_await pause.async_wait(kTuple);
      continue;
    }
    ::fcntl(socket.native_handle(), F_SETFD, FD_CLOEXEC);
    if (state->connections.size() >= MetricsHttpServer::kMaxConnections) continue;  // closed
    auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
    state->connections.insert(stream);
    asio::co_spawn(state->io, Serve(state, stream), [state, stream](std::exception_ptr e) {
      state->connections.erase(stream);
      if (!e) return;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        spdlog::warn("metrics connection ended: {}", ex.what());
      }
    });
  }
}

}  // namespace

MetricsHttpServer::MetricsHttpServer(asio::io_context& io, Render render)
    : state_(std::make_shared<State>(io, std::move(render))) {}

MetricsHttpServer::~MetricsHttpServer() { Stop(); }

Status MetricsHttpServer::Listen(const ListenAddress& address) {
  boost::system::error_code ec;
  tcp::endpoint endpoint(asio::ip::make_address(address.ip, ec),
                         static_cast<unsigned short>(address.port));
  tcp::acceptor& acceptor = state_->acceptor;
  if (!ec) acceptor.open(endpoint.protocol(), ec);
  // Not inherited by the actions deployd starts: a server they leave running must not keep the
  // port from the next deployd.
  if (!ec) ::fcntl(acceptor.native_handle(), F_SETFD, FD_CLOEXEC);
  if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    return Status::Error("cannot listen for metrics on " + address.ToString() + ": " +
                         ec.message());
  }
  asio::co_spawn(state_->io, Accept(state_), asio::detached);
  return Status::Ok();
}

void MetricsHttpServer::Stop() {
  boost::system::error_code ec;
  state_->acceptor.close(ec);
  for (const auto& stream : state_->connections) stream->socket().close(ec);
}

}  // namespace deployd
