#include "checks/benchmark_probe.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/connect.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <memory>
#include <vector>

#include "checks/check_text.h"
#include "checks/http_probe.h"
#include "checks/sse_stream.h"
#include "util/units.h"

namespace deployd {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
namespace json = boost::json;
using asio::ip::tcp;
using boost::system::error_code;
using Clock = std::chrono::steady_clock;

constexpr auto kUseAwaitable = asio::as_tuple(asio::use_awaitable);
constexpr std::size_t kMaxAnswerBytes = 64u << 20;   // of one streamed answer
constexpr std::size_t kKeptAnswerBytes = 64u << 10;  // of its text, for `expect`
constexpr std::size_t kMaxGaps = 1u << 20;           // chunk gaps kept, over a benchmark
constexpr std::size_t kErrorBodyBytes = 4096;        // read of a refusal's body
constexpr std::size_t kExcerptBytes = 200;

// One connection at a time of one worker; closed from outside to stop what it does (a name
// being resolved, a connect, a read).
struct Connection {
  explicit Connection(const asio::any_io_executor& ex) : resolver(ex), socket(ex) {}
  void Close() {
    resolver.cancel();
    error_code ignored;
    socket.close(ignored);
  }
  tcp::resolver resolver;
  tcp::socket socket;
};

struct Job {
  std::string body;
  RequestSample* sample;
};

// What the workers share with the probe. They hold it, so it outlives a probe cancelled while
// they still run.
struct Bench {
  explicit Bench(const asio::any_io_executor& ex) : wake(ex) {}
  void Stop() {
    stopped = true;
    for (auto& c : connections) c->Close();
  }

  HttpUrl url;
  Clock::time_point t0;
  std::vector<Job> jobs;
  std::size_t next = 0;
  int running = 0;
  bool stopped = false;
  std::size_t gaps_left = kMaxGaps;
  std::vector<std::shared_ptr<Connection>> connections;
  asio::steady_timer wake;  // cancelled by the last worker to end
  RequestSample quality;
  std::vector<RequestSample> samples;
};

double Since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

std::string RequestBody(const BenchmarkSpec& spec, const std::string& prompt, int max_tokens,
                        bool greedy) {
  json::object o;
  o["model"] = spec.model;
  if (spec.chat) {
    json::object message{{"role", "user"}, {"content", prompt}};
    o["messages"] = json::array{message};
  } else {
    o["prompt"] = prompt;
  }
  o["max_tokens"] = max_tokens;
  o["stream"] = true;
  o["stream_options"] = json::object{{"include_usage", true}};
  if (spec.ignore_eos && !greedy) o["ignore_eos"] = true;
  if (greedy) o["temperature"] = 0;
  return json::serialize(o);
}

// The events of one read, at `now`; false (the sample's error set) when one is bad. `done`: the
// server's [DONE] came.
bool TakeEvents(Bench& bench, RequestSample& s, const std::vector<std::string>& events, double now,
                double& last_text, bool& done) {
  for (const std::string& event : events) {
    Result<CompletionChunk> chunk = ReadCompletionChunk(event);
    if (!chunk.ok()) {
      s.error = chunk.status().message();
      return false;
    }
    if (!chunk->error.empty()) {
      s.error = "the server reported an error: " + Utf8Excerpt(chunk->error, kExcerptBytes);
      return false;
    }
    if (chunk->done) {
      done = true;
      return true;
    }
    if (chunk->completion_tokens) s.usage_tokens = chunk->completion_tokens;
    if (chunk->text.empty() && chunk->reasoning.empty()) continue;
    if (!s.first_token_ms) {
      s.first_token_ms = now;
    } else if (bench.gaps_left > 0) {
      s.gaps_ms.push_back(now - last_text);
      --bench.gaps_left;
    }
    last_text = now;
    ++s.text_chunks;
    if (s.answer.size() < kKeptAnswerBytes) s.answer += chunk->text;
  }
  return true;
}

// The request's status line and headers; an answer that is not 200 fails the sample with its
// status and the start of its body.
asio::awaitable<bool> ReadHead(Connection& c, boost::beast::flat_buffer& buffer,
                               http::response_parser<http::string_body>& parser, RequestSample& s) {
  auto [ec, n] = co_await http::async_read_header(c.socket, buffer, parser, kUseAwaitable);
  if (ec) {
    s.error = NetworkErrorText(ec);
    co_return false;
  }
  int status = static_cast<int>(parser.get().result_int());
  if (status == 200) co_return true;
  while (!parser.is_done() && parser.get().body().size() < kErrorBodyBytes) {
    auto [read_ec, read] = co_await http::async_read_some(c.socket, buffer, parser, kUseAwaitable);
    if (read_ec) break;
  }
  s.error = "status " + std::to_string(status);
  if (!parser.get().body().empty())
    s.error += ": " + Utf8Excerpt(parser.get().body(), kExcerptBytes);
  co_return false;
}

// Reads the streamed body as it comes: each read's events are timed when it completes.
asio::awaitable<void> ReadStream(Bench& bench, Connection& c, boost::beast::flat_buffer& buffer,
                                 http::response_parser<http::string_body>& parser,
                                 RequestSample& s) {
  SseParser sse;
  std::vector<std::string> events;
  std::string head;  // the body's start, for an answer that is not a stream
  std::size_t received = 0, event_count = 0;
  double last_text = 0;
  bool done = false;
  while (!done) {
    error_code ec;
    if (!parser.is_done())
      std::tie(ec, std::ignore) =
          co_await http::async_read_some(c.socket, buffer, parser, kUseAwaitable);
    double now = Since(bench.t0);
    s.end_ms = now;
    if (bench.stopped) co_return;
    std::string& bytes = parser.get().body();
    received += bytes.size();
    if (head.size() < kExcerptBytes) head += bytes.substr(0, kExcerptBytes - head.size());
    if (received > kMaxAnswerBytes) {
      s.error = "the answer is larger than 64MiB";
      co_return;
    }
    Status fed = sse.Feed(bytes, events);
    bytes.clear();
    if (!fed.ok()) {
      s.error = fed.message();
      co_return;
    }
    if (ec) {
      s.error = "the stream broke off: " + NetworkErrorText(ec);
      co_return;
    }
    done = parser.is_done();
    if (done) sse.Finish(events);
    event_count += events.size();
    if (!TakeEvents(bench, s, events, now, last_text, done)) co_return;
    events.clear();
  }
  if (event_count == 0) {
    s.error = "no streamed events in the answer: " + Utf8Excerpt(head, kExcerptBytes);
  } else if (s.tokens() == 0) {
    s.error = "the answer has no text";
  }
}

// Connects `c` to the server. An address (127.0.0.1, ::1) is not resolved: Asio resolves
// names on a thread of its own.
asio::awaitable<error_code> ConnectTo(const Bench& bench, Connection& c) {
  const HttpUrl& url = bench.url;
  error_code ec;
  asio::ip::address address = asio::ip::make_address(url.host, ec);
  if (!ec) {
    tcp::endpoint endpoint(address, static_cast<unsigned short>(url.port));
    auto [connect_ec] = co_await c.socket.async_connect(endpoint, kUseAwaitable);
    co_return connect_ec;
  }
  auto [resolve_ec, endpoints] =
      co_await c.resolver.async_resolve(url.host, std::to_string(url.port), kUseAwaitable);
  if (resolve_ec) co_return resolve_ec;
  if (bench.stopped) co_return asio::error::operation_aborted;
  auto [connect_ec, endpoint] = co_await asio::async_connect(c.socket, endpoints, kUseAwaitable);
  co_return connect_ec;
}

// One request on `c`, from connecting to the end of its stream.
asio::awaitable<void> Stream(std::shared_ptr<Bench> bench, std::shared_ptr<Connection> c, Job job) {
  RequestSample& s = *job.sample;
  s.start_ms = Since(bench->t0);
  const HttpUrl& url = bench->url;
  error_code ec = co_await ConnectTo(*bench, *c);
  http::request<http::string_body> req(http::verb::post, url.target, 11);
  std::string host = url.host.find(':') == std::string::npos ? url.host : "[" + url.host + "]";
  req.set(http::field::host, host + ":" + std::to_string(url.port));
  req.set(http::field::user_agent, "deployd/" DEPLOYD_VERSION);
  req.set(http::field::connection, "close");
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "text/event-stream");
  req.body() = std::move(job.body);
  req.prepare_payload();
  if (!ec && !bench->stopped)
    std::tie(ec, std::ignore) = co_await http::async_write(c->socket, req, kUseAwaitable);
  boost::beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(boost::none);  // the stream is consumed as it comes; ReadStream bounds it
  bool streaming = false;
  if (ec) {
    s.error = NetworkErrorText(ec);
  } else if (!bench->stopped) {
    streaming = co_await ReadHead(*c, buffer, parser, s);
  }
  if (streaming) co_await ReadStream(*bench, *c, buffer, parser, s);
  s.end_ms = Since(bench->t0);
  // A request still streaming when the benchmark was stopped was cut by the stop, whatever
  // error the closed connection gave it: it did not finish.
  if (bench->stopped) s.error = "stopped";
  s.ended = true;
  c->Close();
}

asio::awaitable<void> Worker(std::shared_ptr<Bench> bench, std::shared_ptr<Connection> c) {
  while (!bench->stopped && bench->next < bench->jobs.size()) {
    Job job = bench->jobs[bench->next++];
    co_await Stream(bench, c, std::move(job));
  }
  if (--bench->running == 0) bench->wake.cancel();
}

// Runs bench->jobs on `workers` connections at once. False when the deadline came first, or
// the awaiting coroutine was cancelled: every connection is then closed.
asio::awaitable<bool> RunJobs(std::shared_ptr<Bench> bench, int workers,
                              Clock::time_point deadline) {
  auto ex = co_await asio::this_coro::executor;
  bench->next = 0;
  bench->running = workers;
  bench->t0 = Clock::now();
  bench->connections.clear();
  for (int i = 0; i < workers; ++i) {
    auto c = std::make_shared<Connection>(ex);
    bench->connections.push_back(c);
    // Not cancellable through a slot: a worker is stopped by closing its connection.
    asio::co_spawn(ex, Worker(bench, c), asio::detached);
  }
  bench->wake.expires_at(deadline);
  while (bench->running > 0) {
    auto [ec] = co_await bench->wake.async_wait(kUseAwaitable);
    asio::cancellation_state state = co_await asio::this_coro::cancellation_state;
    if (!ec || state.cancelled() != asio::cancellation_type::none) {
      bench->Stop();
      co_return false;
    }
  }
  co_return true;
}

std::string PromptOf(const BenchmarkSpec& spec, int request) {
  if (spec.prompts.empty()) return SyntheticPrompt(spec.prompt_tokens, request);
  return spec.prompts[static_cast<std::size_t>(request) % spec.prompts.size()];
}

json::object QualityEvidence(const BenchmarkExpect& expect, const RequestSample& s) {
  json::object q{{"prompt", Utf8Excerpt(expect.prompt, kExcerptBytes)},
                 {"answer", Utf8Excerpt(s.answer, kExcerptBytes)}};
  if (expect.equals) {
    q["equals"] = *expect.equals;
  } else {
    q["matches"] = expect.matches;
  }
  return q;
}

CheckOutcome Failed(const Check& check, const std::string& detail, json::object evidence,
                    json::object measured) {
  evidence["error"] = detail;
  for (const auto& [key, value] : measured) evidence[key] = value;
  CheckOutcome outcome = MakeOutcome(check, false, detail, std::move(evidence));
  outcome.measured = std::move(measured);
  return outcome;
}

std::size_t Finished(const std::vector<RequestSample>& samples) {
  std::size_t n = 0;
  for (const RequestSample& s : samples) n += s.ended && s.error != "stopped";
  return n;
}

}  // namespace

std::string SyntheticPrompt(int words, int request) {
  static constexpr const char* kWords[] = {
      "time",     "year",    "people",   "way",    "day",        "man",    "thing",   "woman",
      "life",     "child",   "world",    "school", "state",      "family", "student", "group",
      "country",  "problem", "hand",     "part",   "place",      "case",   "week",    "company",
      "system",   "program", "question", "work",   "government", "number", "night",   "point",
      "home",     "water",   "room",     "mother", "area",       "money",  "story",   "fact",
      "month",    "lot",     "right",    "study",  "book",       "eye",    "job",     "word",
      "business", "issue",   "side",     "kind",   "head",       "house",  "service", "friend",
      "father",   "power",   "hour",     "game",   "line",       "end",    "member",  "law"};
  constexpr int kCount = sizeof kWords / sizeof kWords[0];
  std::string prompt;
  for (int k = 0; k < words; ++k) {
    if (k > 0) prompt += ' ';
    prompt += kWords[(k * 7 + request * 13 + request / kCount) % kCount];
  }
  return prompt;
}

asio::awaitable<CheckOutcome> ProbeBenchmark(const Check& check,
                                             const BenchmarkBaseline& baseline) {
  const BenchmarkSpec& spec = check.benchmark;
  json::object evidence = CheckEvidence(check);
  json::object measured;
  Result<HttpUrl> url = ParseHttpUrl(spec.url);
  if (!url.ok()) co_return Failed(check, url.status().message(), evidence, measured);
  auto bench = std::make_shared<Bench>(co_await asio::this_coro::executor);
  bench->url = *url;
  const Clock::time_point deadline = Clock::now() + check.timeout;
  const std::string timed_out = "timed out after " + FormatDuration(check.timeout);
  if (spec.expect) {
    Job job{RequestBody(spec, spec.expect->prompt, spec.expect->max_tokens, true), &bench->quality};
    bench->jobs = {std::move(job)};
    bool finished = co_await RunJobs(bench, 1, deadline);
    if (!finished)
      co_return Failed(check, timed_out + " in the quality request", evidence, measured);
    json::object quality = QualityEvidence(*spec.expect, bench->quality);
    if (!bench->quality.ok()) {
      measured["quality"] = std::move(quality);
      co_return Failed(check, "the quality request failed: " + bench->quality.error, evidence,
                       measured);
    }
    AnswerVerdict answer = JudgeAnswer(*spec.expect, bench->quality.answer);
    quality["passed"] = answer.passed;
    measured["quality"] = std::move(quality);
    if (!answer.passed) co_return Failed(check, answer.detail, evidence, measured);
  }
  bench->samples.assign(static_cast<std::size_t>(spec.requests), RequestSample{});
  bench->jobs.clear();
  for (int i = 0; i < spec.requests; ++i)
    bench->jobs.push_back(Job{RequestBody(spec, PromptOf(spec, i), spec.max_tokens, false),
                              &bench->samples[static_cast<std::size_t>(i)]});
  bool finished = co_await RunJobs(bench, spec.concurrency, deadline);
  if (!finished)
    co_return Failed(check,
                     timed_out + ": " + std::to_string(Finished(bench->samples)) + " of " +
                         std::to_string(spec.requests) + " requests finished",
                     evidence, measured);
  double wall_ms = 0;
  for (const RequestSample& s : bench->samples) wall_ms = std::max(wall_ms, s.end_ms);
  BenchmarkFigures figures = ComputeFigures(bench->samples, wall_ms);
  figures.url = spec.url;
  figures.model = spec.model;
  figures.load = BenchmarkLoad(spec);
  BenchmarkVerdict verdict = JudgeBenchmark(spec, figures, baseline);
  measured["benchmark"] = EncodeFigures(figures);
  measured["baseline"] = verdict.baseline;
  for (const auto& [key, value] : measured) evidence[key] = value;
  CheckOutcome outcome = MakeOutcome(check, verdict.passed, verdict.detail, std::move(evidence));
  outcome.measured = std::move(measured);
  co_return outcome;
}

}  // namespace deployd
