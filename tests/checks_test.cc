#include "checks/checks.h"

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/serialize.hpp>
#include <boost/system/system_error.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>

using namespace deployd;
using namespace std::chrono_literals;
namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace fs = std::filesystem;
using asio::ip::tcp;

namespace {

const auto kLoopback = asio::ip::make_address("127.0.0.1");

struct SeenRequest {
  std::string method;
  std::string target;
  std::string content_type;
  std::string body;
};

// A real HTTP server on 127.0.0.1, on the test's io_context. `respond` decides each answer
// from the number of requests seen before it (0, 1, 2, …).
class TestHttpServer {
 public:
  using Responder = std::function<std::pair<int, std::string>(int index)>;

  TestHttpServer(asio::io_context& ctx, Responder respond)
      : acceptor_(ctx, tcp::endpoint(kLoopback, 0)), respond_(std::move(respond)) {
    asio::co_spawn(ctx, Accept(), asio::detached);
  }
  // The io_context must not run again after this: pending coroutines refer to the server.
  ~TestHttpServer() { acceptor_.close(); }

  int port() const { return acceptor_.local_endpoint().port(); }
  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(port()) + path;
  }
  const std::vector<SeenRequest>& requests() const { return requests_; }

 private:
  asio::awaitable<void> Accept() {
    while (true) {
      tcp::socket socket = co_await acceptor_.async_accept(asio::use_awaitable);
      asio::co_spawn(acceptor_.get_executor(), Serve(std::move(socket)), asio::detached);
    }
  }

  asio::awaitable<void> Serve(tcp::socket socket) {
    boost::beast::flat_buffer buffer;
    http::request<http::string_body> request;
    co_await http::async_read(socket, buffer, request, asio::use_awaitable);
    SeenRequest seen;
    seen.method = std::string(request.method_string());
    seen.target = std::string(request.target());
    seen.content_type = std::string(request[http::field::content_type]);
    seen.body = request.body();
    requests_.push_back(seen);
    auto [status, body] = respond_(static_cast<int>(requests_.size()) - 1);
    http::response<http::string_body> response(static_cast<http::status>(status), 11);
    response.body() = body;
    response.prepare_payload();
    co_await http::async_write(socket, response, asio::use_awaitable);
  }

  tcp::acceptor acceptor_;
  Responder respond_;
  std::vector<SeenRequest> requests_;
};

// Drives the io_context until `task` completes; rethrows what it threw.
template <typename T>
T RunTask(asio::io_context& ctx, asio::awaitable<T> task) {
  std::optional<T> result;
  std::exception_ptr error;
  bool done = false;
  asio::co_spawn(ctx, std::move(task), [&](std::exception_ptr e, T value) {
    done = true;
    error = e;
    if (!e) result = std::move(value);
  });
  ctx.restart();
  while (!done && ctx.run_one() > 0) {
  }
  REQUIRE(done);  // else the io_context ran out of work with the task still pending
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

CheckOutcome Probe(asio::io_context& ctx, const Check& check) {
  return RunTask(ctx, ProbeOnce(check));
}

// A port nothing listens on: bound (so nobody else gets it meanwhile) but not listening.
class RefusedPort {
 public:
  explicit RefusedPort(asio::io_context& ctx) : socket_(ctx) {
    socket_.open(tcp::v4());
    socket_.bind(tcp::endpoint(kLoopback, 0));
  }
  int port() const { return socket_.local_endpoint().port(); }

 private:
  tcp::socket socket_;
};

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "checks_test.XXXXXX").string();
    path_ = ::mkdtemp(pattern.data());
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  fs::path path_;
};

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path) << content;
}

Check HttpCheck(const std::string& url) {
  Check check;
  check.kind = CheckKind::kHttp;
  check.url = url;
  return check;
}

Check RunCommandCheck(const std::string& script) {
  Check check;
  check.kind = CheckKind::kRun;
  check.command.shell = true;
  check.command.script = script;
  return check;
}

std::string Text(const boost::json::value& value) { return boost::json::serialize(value); }
std::string Str(const boost::json::value& value) { return std::string(value.as_string()); }

}  // namespace

TEST_CASE("http check passes on the expected status") {
  asio::io_context ctx;
  TestHttpServer server(ctx, [](int) { return std::pair(200, std::string("{\"ok\":true}")); });
  Check check = HttpCheck(server.Url("/health"));
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.attempts == 1);
  CHECK(outcome.summary == "http GET " + server.Url("/health") + ": status 200");
  CHECK(outcome.evidence.at("check") == "http");
  CHECK(Str(outcome.evidence.at("target")) == "GET " + server.Url("/health"));
  CHECK(outcome.evidence.at("status_code") == 200);
  CHECK(outcome.evidence.at("body_excerpt") == "{\"ok\":true}");
  CHECK(outcome.evidence.contains("elapsed_ms"));
  REQUIRE(server.requests().size() == 1);
  CHECK(server.requests()[0].method == "GET");
  CHECK(server.requests()[0].target == "/health");
}

TEST_CASE("http check fails on another status, with the response as evidence") {
  asio::io_context ctx;
  TestHttpServer server(ctx, [](int) { return std::pair(503, std::string("loading")); });
  Check check = HttpCheck(server.Url("/health"));
  CheckOutcome outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "http GET " + server.Url("/health") + ": status 503 (expected 200)");
  CHECK(outcome.evidence.at("status_code") == 503);
  CHECK(outcome.evidence.at("body_excerpt") == "loading");
  CHECK_FALSE(outcome.evidence.contains("error"));
}

TEST_CASE("http check with body_contains looks into the body") {
  asio::io_context ctx;
  TestHttpServer server(ctx, [](int) { return std::pair(200, std::string("state: warming")); });
  Check check = HttpCheck(server.Url("/ready"));
  check.body_contains = "ready";
  CheckOutcome outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary ==
        "http GET " + server.Url("/ready") + ": status 200, body does not contain 'ready'");
  check.body_contains = "warming";
  CHECK(Probe(ctx, check).passed);
}

TEST_CASE("http check with json expectations: vLLM's /v1/models lists the model") {
  asio::io_context ctx;
  TestHttpServer server(ctx, [](int) {
    return std::pair(200, std::string(R"({"object":"list","data":[{"id":"/models/glm5"},)"
                                      R"({"id":"/models/kimi","max_model_len":131072}]})"));
  });
  Check check = HttpCheck(server.Url("/v1/models"));
  check.json = {{"data.*.id", JsonExpectation::Op::kEquals, "/models/kimi"},
                {"data.1.max_model_len", JsonExpectation::Op::kEquals, "131072"},
                {"object", JsonExpectation::Op::kContains, "lis"}};
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary ==
        "http GET " + server.Url("/v1/models") + ": status 200, 3 json expectations met");
  check.json = {{"data.*.id", JsonExpectation::Op::kEquals, "/models/qwen"}};
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "http GET " + server.Url("/v1/models") +
                               ": status 200, json data.*.id: no value equals '/models/qwen' "
                               "(saw \"/models/glm5\", \"/models/kimi\")");
  check.json = {{"data.5.id", JsonExpectation::Op::kEquals, "x"}};
  outcome = Probe(ctx, check);
  CHECK(outcome.summary == "http GET " + server.Url("/v1/models") +
                               ": status 200, json data.5.id: nothing at this path");
}

TEST_CASE("http check with json expectations on a body that is not JSON") {
  asio::io_context ctx;
  TestHttpServer server(ctx, [](int) { return std::pair(200, std::string("<html>")); });
  Check check = HttpCheck(server.Url("/v1/models"));
  check.json = {{"data", JsonExpectation::Op::kContains, "x"}};
  CheckOutcome outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary.find(": status 200, the body is not JSON (") != std::string::npos);
}

TEST_CASE("http body excerpt is cut at 512 bytes and is valid UTF-8") {
  asio::io_context ctx;
  TestHttpServer server(ctx, [](int index) {
    // 511 bytes, then a 2-byte character that does not fit; then bytes that are not UTF-8.
    return index == 0 ? std::pair(200, std::string(511, 'x') + "é" + std::string(100, 'y'))
                      : std::pair(200, std::string("ok \xff\xfe é"));
  });
  CheckOutcome outcome = Probe(ctx, HttpCheck(server.Url("/")));
  CHECK(Str(outcome.evidence.at("body_excerpt")) == std::string(511, 'x') + "…");
  outcome = Probe(ctx, HttpCheck(server.Url("/")));
  CHECK(Str(outcome.evidence.at("body_excerpt")) == "ok \uFFFD\uFFFD é");
}

TEST_CASE("http check judges the status of a large body and searches its first 4MiB") {
  asio::io_context ctx;
  TestHttpServer server(ctx, [](int) {
    return std::pair(200, "model weights " + std::string(8 << 20, 'w') + " TAIL");
  });
  Check check = HttpCheck(server.Url("/model.bin"));
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.evidence.at("body_too_large") == true);
  CHECK(Str(outcome.evidence.at("body_excerpt")).substr(0, 14) == "model weights ");
  check.body_contains = "weights";
  CHECK(Probe(ctx, check).passed);
  check.body_contains = "TAIL";
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "http GET " + server.Url("/model.bin") +
                               ": status 200, body does not contain 'TAIL' in its first 4MiB");
}

namespace {

// No Content-Length: the end of the connection is the end of the body (HTTP/1.0 style).
asio::awaitable<void> AnswerWithoutLength(tcp::acceptor& acceptor) {
  tcp::socket socket = co_await acceptor.async_accept(asio::use_awaitable);
  std::string request;
  co_await asio::async_read_until(socket, asio::dynamic_buffer(request), "\r\n\r\n",
                                  asio::use_awaitable);
  std::string response = "HTTP/1.0 200 OK\r\n\r\nall good";
  co_await asio::async_write(socket, asio::buffer(response), asio::use_awaitable);
}

}  // namespace

TEST_CASE("http check reads a body that ends when the server closes") {
  asio::io_context ctx;
  tcp::acceptor acceptor(ctx, tcp::endpoint(kLoopback, 0));
  asio::co_spawn(ctx, AnswerWithoutLength(acceptor), asio::detached);
  Check check = HttpCheck("http://127.0.0.1:" + std::to_string(acceptor.local_endpoint().port()));
  check.body_contains = "good";
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "http GET " + check.url + ": status 200");
  CHECK(Str(outcome.evidence.at("body_excerpt")) == "all good");
}

TEST_CASE("http POST sends the JSON body") {
  asio::io_context ctx;
  TestHttpServer server(ctx, [](int) { return std::pair(200, std::string("{}")); });
  Check check = HttpCheck(server.Url("/v1/completions?x=1"));
  check.method = "POST";
  check.body = R"({"prompt": "hi", "max_tokens": 1})";
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "http POST " + server.Url("/v1/completions?x=1") + ": status 200");
  REQUIRE(server.requests().size() == 1);
  CHECK(server.requests()[0].method == "POST");
  CHECK(server.requests()[0].target == "/v1/completions?x=1");
  CHECK(server.requests()[0].content_type == "application/json");
  CHECK(server.requests()[0].body == check.body);
}

TEST_CASE("http check against a refused port says so") {
  asio::io_context ctx;
  RefusedPort refused(ctx);
  std::string url = "http://127.0.0.1:" + std::to_string(refused.port()) + "/health";
  CheckOutcome outcome = Probe(ctx, HttpCheck(url));
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "http GET " + url + ": connection refused");
  CHECK(outcome.evidence.at("error") == "connection refused");
  CHECK_FALSE(outcome.evidence.contains("status_code"));
}

TEST_CASE("http check times out against a server that never answers") {
  asio::io_context ctx;
  // Listening but never accepting: the kernel completes the handshake, nobody reads.
  tcp::acceptor silent(ctx, tcp::endpoint(kLoopback, 0));
  std::string url = "http://127.0.0.1:" + std::to_string(silent.local_endpoint().port()) + "/";
  Check check = HttpCheck(url);
  check.timeout = 200ms;
  auto start = std::chrono::steady_clock::now();
  CheckOutcome outcome = Probe(ctx, check);
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "http GET " + url + ": timed out after 200ms");
  CHECK(outcome.evidence.at("error") == "timed out after 200ms");
  CHECK(elapsed >= 200ms);
  CHECK(elapsed < 2s);
}

TEST_CASE("http check rejects a URL it cannot use") {
  asio::io_context ctx;
  CheckOutcome outcome = Probe(ctx, HttpCheck("https://example.com/"));
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary ==
        "http GET https://example.com/: 'https://example.com/' is not an "
        "http:// URL");
}

TEST_CASE("tcp check connects or reports why not") {
  asio::io_context ctx;
  tcp::acceptor listening(ctx, tcp::endpoint(kLoopback, 0));
  Check check;
  check.kind = CheckKind::kTcp;
  check.host = "127.0.0.1";
  check.port = listening.local_endpoint().port();
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "tcp 127.0.0.1:" + std::to_string(check.port) + ": connected");

  RefusedPort refused(ctx);
  check.port = refused.port();
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "tcp 127.0.0.1:" + std::to_string(check.port) + ": connection refused");
  CHECK(outcome.evidence.at("error") == "connection refused");
  CHECK(Str(outcome.evidence.at("target")) == "127.0.0.1:" + std::to_string(check.port));
}

TEST_CASE("weights_complete check: a whole shard passes, a truncated one fails") {
  asio::io_context ctx;
  TempDir dir;
  // One tensor of 8 bytes: 8 bytes of header length, the header, the data.
  std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string length(8, '\0');
  length[0] = static_cast<char>(header.size());
  WriteFile(dir / "model.safetensors", length + header + std::string(8, 'x'));
  Check check;
  check.kind = CheckKind::kWeightsComplete;
  check.path = dir.str();
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "weights_complete " + dir.str() + ": 1 shard complete (70B)");
  CHECK(outcome.evidence.at("check") == "weights_complete");
  CHECK(DescribeCheck(check) == "weights_complete " + dir.str());

  WriteFile(dir / "model.safetensors", length + header + std::string(7, 'x'));
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary ==
        "weights_complete " + dir.str() + ": shard model.safetensors is truncated (69B of 70B)");
}

TEST_CASE("file check: exists, absent, min_size") {
  asio::io_context ctx;
  TempDir dir;
  WriteFile(dir / "config.json", "0123456789");
  Check check;
  check.kind = CheckKind::kFile;
  check.path = dir / "config.json";

  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "file " + check.path + ": exists (10B)");
  CHECK(outcome.evidence.at("size") == 10);
  CHECK(outcome.evidence.at("type") == "file");

  check.min_size = 2048;
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "file " + check.path + ": 10B, expected at least 2KiB");

  check.min_size.reset();
  check.absent = true;
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "file " + check.path + ": exists (expected absent)");

  check.path = dir / "missing";
  outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "file " + check.path + ": absent");

  check.absent = false;
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "file " + check.path + ": does not exist");
  CHECK(outcome.evidence.at("error") == "no such file");

  check.path = dir.str();
  outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.evidence.at("type") == "directory");
}

TEST_CASE("command check looks on PATH") {
  asio::io_context ctx;
  TempDir dir;
  WriteFile(dir / "hf", "#!/bin/sh\n");
  fs::permissions(dir / "hf", fs::perms::owner_all);
  WriteFile(dir / "not-executable", "");
  std::string old_path = std::getenv("PATH");
  ::setenv("PATH", (dir.str() + ":/nonexistent").c_str(), 1);

  Check check;
  check.kind = CheckKind::kCommand;
  check.name = "hf";
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "command hf: " + (dir / "hf"));
  CHECK(Str(outcome.evidence.at("path")) == dir / "hf");

  check.name = "not-executable";
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "command not-executable: not found on PATH");
  CHECK(Text(outcome.evidence.at("searched")) == "[\"" + dir.str() + "\",\"/nonexistent\"]");

  check.name = dir / "hf";
  CHECK(Probe(ctx, check).passed);
  check.name = dir / "not-executable";
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "command " + check.name + ": not an executable file");
  ::setenv("PATH", old_path.c_str(), 1);
}

TEST_CASE("disk_free check compares available bytes") {
  asio::io_context ctx;
  TempDir dir;
  Check check;
  check.kind = CheckKind::kDiskFree;
  check.path = dir.str();
  check.at_least = 1;
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.evidence.at("required_bytes") == 1);

  check.at_least = 4ull << 60;
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK_THAT(outcome.summary, Catch::StartsWith("disk_free " + dir.str() + ": ") &&
                                  Catch::EndsWith(" free, 4EiB required"));
  CHECK(outcome.evidence.at("required") == "4EiB");

  check.path = dir / "missing";
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "disk_free " + check.path + ": No such file or directory");
}

TEST_CASE("port_free check binds the port") {
  asio::io_context ctx;
  Check check;
  check.kind = CheckKind::kPortFree;
  check.host = "127.0.0.1";
  {
    tcp::acceptor probe(ctx, tcp::endpoint(kLoopback, 0));
    check.port = probe.local_endpoint().port();
  }
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "port_free 127.0.0.1:" + std::to_string(check.port) + ": free");

  tcp::acceptor taken(ctx, tcp::endpoint(kLoopback, check.port));
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  std::string comm;
  std::getline(std::ifstream("/proc/self/comm"), comm);
  CHECK(outcome.summary == "port_free 127.0.0.1:" + std::to_string(check.port) +
                               ": in use by pid " + std::to_string(::getpid()) + " (" + comm + ")");
  CHECK(Str(outcome.evidence.at("error")) ==
        "127.0.0.1:" + std::to_string(check.port) + " is in use");
  CHECK(outcome.evidence.at("pid") == ::getpid());

  check.host = "";  // the wildcard address conflicts with the loopback listener
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK_THAT(outcome.summary,
             Catch::StartsWith("port_free 0.0.0.0:" + std::to_string(check.port) + ": in use"));
}

TEST_CASE("run check: exit status and output") {
  asio::io_context ctx;
  Check check = RunCommandCheck("echo starting; echo 'ERROR: boom' >&2; exit 1");
  CheckOutcome outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "run 'echo starting; echo 'ERROR: boom' >&2; exit 1': exit status 1");
  CHECK(outcome.evidence.at("exit_status") == 1);
  CHECK(Text(outcome.evidence.at("output_tail")) == R"(["starting","ERROR: boom"])");

  check = RunCommandCheck("echo Server READY");
  outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "run 'echo Server READY': exit status 0");

  check.output_matches = "ready$";
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "run 'echo Server READY': output does not match 'ready$'");
  check.output_matches = "(?i)ready$";
  CHECK(Probe(ctx, check).passed);
}

TEST_CASE("run check: environment, argv, and a long command in the summary") {
  asio::io_context ctx;
  Check check;
  check.kind = CheckKind::kRun;
  check.command.argv = {"/bin/sh", "-c", "test \"$WANTED\" = yes"};
  check.env["WANTED"] = "yes";
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "run '/bin/sh -c 'test \"$WANTED\" = yes'': exit status 0");
  check.env["WANTED"] = "no";
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "run '/bin/sh -c 'test \"$WANTED\" = yes'': exit status 1");

  // The summary keeps the first 60 bytes of the command; the evidence has all of it.
  check = RunCommandCheck("true 'a fairly long command line, longer than a summary should be'");
  outcome = Probe(ctx, check);
  CHECK(outcome.summary ==
        "run 'true 'a fairly long command line, longer than a summary shou…': exit status 0");
  CHECK(Str(outcome.evidence.at("target")) == check.command.script);
}

TEST_CASE("run check: version_at_least") {
  asio::io_context ctx;
  Check check = RunCommandCheck("echo 'vllm 0.14.1+cu128'");
  check.version_at_least = "0.15.0";
  CheckOutcome outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "run 'echo 'vllm 0.14.1+cu128'': version 0.14.1+cu128 is below 0.15.0");
  CHECK(outcome.evidence.at("version") == "0.14.1+cu128");

  check = RunCommandCheck("echo 0.16.0rc2.dev313");
  check.version_at_least = "0.15";
  outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "run 'echo 0.16.0rc2.dev313': version 0.16.0rc2.dev313 >= 0.15");

  check = RunCommandCheck("echo no version here");
  check.version_at_least = "1.0";
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "run 'echo no version here': no version in the output");
}

TEST_CASE("run check: the version is read from stdout first, and its line is evidence") {
  asio::io_context ctx;
  // A warning on stderr, said before the version, has a version-like token of its own.
  Check check = RunCommandCheck(
      "echo 'FutureWarning: Python 3.9 support is deprecated' >&2; echo 'vllm 0.16.0'");
  check.version_at_least = "0.15.0";
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK_THAT(outcome.summary, Catch::EndsWith(": version 0.16.0 >= 0.15.0"));
  CHECK(outcome.evidence.at("version") == "0.16.0");
  CHECK(outcome.evidence.at("version_line") == "vllm 0.16.0");
  CHECK(outcome.evidence.at("version_from") == "stdout");

  // A tool that prints its version on stderr only is still read.
  check = RunCommandCheck("echo 'tool version 2.1.0' >&2");
  check.version_at_least = "3";
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK_THAT(outcome.summary, Catch::EndsWith(": version 2.1.0 is below 3"));
  CHECK(outcome.evidence.at("version_line") == "tool version 2.1.0");
  CHECK(outcome.evidence.at("version_from") == "stderr");
}

TEST_CASE("run check: version_below bounds the version from above, in PEP 440 order") {
  asio::io_context ctx;
  Check check = RunCommandCheck("echo 0.16.0rc2.dev313");
  check.version_at_least = "0.15";
  check.version_below = "0.16.0";  // a pre-release of 0.16.0 is below it
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary ==
        "run 'echo 0.16.0rc2.dev313': version 0.16.0rc2.dev313 >= 0.15, < 0.16.0");
  CHECK(DescribeCheck(check) == "run 'echo 0.16.0rc2.dev313' version >= 0.15 version < 0.16.0");

  check = RunCommandCheck("echo 0.16.0");
  check.version_below = "0.16.0";
  outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "run 'echo 0.16.0': version 0.16.0 is not below 0.16.0");
  check.version_below = "0.17";
  outcome = Probe(ctx, check);
  CHECK(outcome.passed);
  CHECK(outcome.summary == "run 'echo 0.16.0': version 0.16.0 < 0.17");
}

TEST_CASE("run check: timeout terminates the command") {
  asio::io_context ctx;
  Check check = RunCommandCheck("echo waiting; sleep 30");
  check.timeout = 300ms;
  auto start = std::chrono::steady_clock::now();
  CheckOutcome outcome = Probe(ctx, check);
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "run 'echo waiting; sleep 30': timed out after 300ms");
  CHECK(outcome.evidence.at("exit_status") == 128 + SIGTERM);
  CHECK(Text(outcome.evidence.at("output_tail")) == R"(["waiting"])");
}

TEST_CASE("run check: a program that cannot start") {
  asio::io_context ctx;
  Check check;
  check.kind = CheckKind::kRun;
  check.command.argv = {"/nonexistent/tool", "--version"};
  CheckOutcome outcome = Probe(ctx, check);
  CHECK_FALSE(outcome.passed);
  CHECK_THAT(outcome.summary, Catch::StartsWith("run '/nonexistent/tool --version': cannot start"));
}

TEST_CASE("RunCheck polls until the server is healthy") {
  asio::io_context ctx;
  TestHttpServer server(ctx, [](int index) {
    return index < 2 ? std::pair(503, std::string("loading")) : std::pair(200, std::string("ok"));
  });
  Check check = HttpCheck(server.Url("/health"));
  check.after = 50ms;
  check.every = 50ms;
  check.within = 10s;
  auto start = std::chrono::steady_clock::now();
  CheckOutcome outcome = RunTask(ctx, RunCheck(check));
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(outcome.passed);
  CHECK(outcome.attempts == 3);
  CHECK(outcome.summary == "http GET " + server.Url("/health") + ": status 200");
  CHECK(server.requests().size() == 3);
  CHECK(elapsed >= 150ms);  // after + 2 × every
  CHECK(elapsed < 5s);
}

TEST_CASE("RunCheck gives up when within runs out, with the last evidence") {
  asio::io_context ctx;
  TestHttpServer server(
      ctx, [](int index) { return std::pair(503, "attempt " + std::to_string(index)); });
  Check check = HttpCheck(server.Url("/health"));
  check.every = 100ms;
  check.within = 350ms;
  auto start = std::chrono::steady_clock::now();
  CheckOutcome outcome = RunTask(ctx, RunCheck(check));
  auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "http GET " + server.Url("/health") + ": status 503 (expected 200)");
  // Tries at 0, 100, 200, 300 and a last one at the deadline (350), give or take scheduling.
  CHECK(outcome.attempts >= 3);
  CHECK(outcome.attempts <= 5);
  CHECK(static_cast<int>(server.requests().size()) == outcome.attempts);
  CHECK(Str(outcome.evidence.at("body_excerpt")) ==
        "attempt " + std::to_string(outcome.attempts - 1));
  CHECK(elapsed >= 350ms);
  CHECK(elapsed < 3s);
}

TEST_CASE("RunCheck without within tries once") {
  asio::io_context ctx;
  RefusedPort refused(ctx);
  Check check;
  check.kind = CheckKind::kTcp;
  check.port = refused.port();
  CheckOutcome outcome = RunTask(ctx, RunCheck(check));
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.attempts == 1);
}

namespace {

// Starts RunCheck with a cancellation slot, emits the signal after `delay`, and returns how the
// check ended: the exception it threw (if any) and how long after the signal it ended.
struct Cancelled {
  std::exception_ptr error;
  std::chrono::steady_clock::duration after_signal{};
};

Cancelled CancelAfter(asio::io_context& ctx, const Check& check, Duration delay,
                      std::function<void()> before_cancel = nullptr) {
  asio::cancellation_signal signal;
  Cancelled result;
  bool done = false;
  std::chrono::steady_clock::time_point emitted;
  asio::co_spawn(
      ctx, RunCheck(check),
      asio::bind_cancellation_slot(signal.slot(), [&](std::exception_ptr e, CheckOutcome) {
        done = true;
        result.error = e;
        result.after_signal = std::chrono::steady_clock::now() - emitted;
      }));
  asio::steady_timer timer(ctx, delay);
  timer.async_wait([&](boost::system::error_code) {
    if (before_cancel) before_cancel();
    emitted = std::chrono::steady_clock::now();
    signal.emit(asio::cancellation_type::terminal);
  });
  ctx.restart();
  while (!done && ctx.run_one() > 0) {
  }
  REQUIRE(done);
  return result;
}

bool IsOperationAborted(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const boost::system::system_error& e) {
    return e.code() == asio::error::operation_aborted;
  } catch (...) {
  }
  return false;
}

}  // namespace

TEST_CASE("RunCheck stops at once when cancelled while polling") {
  asio::io_context ctx;
  TestHttpServer server(ctx, [](int) { return std::pair(503, std::string("loading")); });
  Check check = HttpCheck(server.Url("/health"));
  check.every = 10s;
  check.within = 60s;
  Cancelled cancelled = CancelAfter(ctx, check, 200ms);
  REQUIRE(cancelled.error);
  CHECK(IsOperationAborted(cancelled.error));
  CHECK(cancelled.after_signal < 500ms);
  CHECK(server.requests().size() == 1);
}

TEST_CASE("RunCheck stops at once when cancelled during a hanging http probe") {
  asio::io_context ctx;
  tcp::acceptor silent(ctx, tcp::endpoint(kLoopback, 0));
  Check check = HttpCheck("http://127.0.0.1:" + std::to_string(silent.local_endpoint().port()));
  check.timeout = 30s;
  Cancelled cancelled = CancelAfter(ctx, check, 200ms);
  CHECK(IsOperationAborted(cancelled.error));
  CHECK(cancelled.after_signal < 500ms);
}

TEST_CASE("cancelling a run probe kills its process group") {
  asio::io_context ctx;
  TempDir dir;
  // The shell and a background grandchild in the same process group; both must go.
  Check check = RunCommandCheck("sleep 30 & echo $$ $! > " + (dir / "pids") + "; wait");
  check.timeout = 60s;
  std::vector<int> pidfds;
  Cancelled cancelled = CancelAfter(ctx, check, 500ms, [&] {
    std::ifstream in(dir / "pids");
    pid_t pid;
    while (in >> pid) pidfds.push_back(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  });
  CHECK(IsOperationAborted(cancelled.error));
  CHECK(cancelled.after_signal < 500ms);
  REQUIRE(pidfds.size() == 2);

  // A pidfd becomes readable when its process exits (child or not).
  int exited = 0;
  asio::steady_timer limit(ctx, 5s);
  std::vector<std::unique_ptr<asio::posix::stream_descriptor>> watches;
  for (int fd : pidfds) {
    REQUIRE(fd >= 0);
    auto watch = std::make_unique<asio::posix::stream_descriptor>(ctx, fd);
    watch->async_wait(asio::posix::descriptor_base::wait_read, [&](boost::system::error_code ec) {
      if (!ec && ++exited == 2) limit.cancel();
    });
    watches.push_back(std::move(watch));
  }
  bool timed_out = false;
  limit.async_wait([&](boost::system::error_code ec) {
    timed_out = !ec;
    for (auto& watch : watches) watch->cancel();
  });
  // Not ctx.run(): the child's SIGKILL escalation timer would keep it busy for the grace.
  while ((exited < 2 && !timed_out) && ctx.run_one() > 0) {
  }
  CHECK_FALSE(timed_out);
  CHECK(exited == 2);
}

TEST_CASE("DescribeCheck names the check and what it expects") {
  Check check = HttpCheck("http://127.0.0.1:8000/health");
  CHECK(DescribeCheck(check) == "http GET http://127.0.0.1:8000/health");
  check.status = 204;
  check.body_contains = "ok";
  CHECK(DescribeCheck(check) == "http GET http://127.0.0.1:8000/health status 204 containing 'ok'");

  check = Check();
  check.kind = CheckKind::kDiskFree;
  check.path = "/shared";
  check.at_least = 600ull << 30;
  CHECK(DescribeCheck(check) == "disk_free /shared >= 600GiB");

  check = RunCommandCheck("python3 -c 'import vllm; print(vllm.__version__)'");
  check.version_at_least = "0.15.0";
  CHECK(DescribeCheck(check) ==
        "run 'python3 -c 'import vllm; print(vllm.__version__)'' version >= 0.15.0");

  check = Check();
  check.kind = CheckKind::kPortFree;
  check.port = 8000;
  CHECK(DescribeCheck(check) == "port_free 0.0.0.0:8000");
  check.kind = CheckKind::kTcp;
  check.host = "::1";
  CHECK(DescribeCheck(check) == "tcp [::1]:8000");
  check.kind = CheckKind::kCommand;
  check.name = "hf";
  CHECK(DescribeCheck(check) == "command hf");
  check.kind = CheckKind::kFile;
  check.path = "/x";
  check.absent = true;
  CHECK(DescribeCheck(check) == "file /x absent");
}
