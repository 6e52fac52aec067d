// Reading a streamed completion (checks/sse_stream.h): the event-stream framing, fed in any
// pieces, and what each completion chunk says.
#include "checks/sse_stream.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace deployd;

namespace {

std::vector<std::string> FeedAll(const std::vector<std::string>& pieces, bool finish = true) {
  SseParser parser;
  std::vector<std::string> events;
  for (const std::string& piece : pieces) REQUIRE(parser.Feed(piece, events).ok());
  if (finish) parser.Finish(events);
  return events;
}

}  // namespace

TEST_CASE("SSE: events end at a blank line, whatever pieces the bytes come in", "[sse]") {
  const std::string stream = "data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\ndata: [DONE]\n\n";
  std::vector<std::string> expected = {"{\"a\":1}", "{\"b\":2}", "[DONE]"};
  CHECK(FeedAll({stream}) == expected);
  std::vector<std::string> bytes;
  for (char c : stream) bytes.emplace_back(1, c);
  CHECK(FeedAll(bytes) == expected);
  CHECK(FeedAll({stream.substr(0, 9), stream.substr(9, 13), stream.substr(22)}) == expected);
}

TEST_CASE("SSE: data lines join, comments and other fields are skipped", "[sse]") {
  CHECK(FeedAll({": keep-alive\n\nevent: message\nid: 7\ndata: one\ndata:two\nretry: 5\n\n"}) ==
        std::vector<std::string>{"one\ntwo"});
  // Only one space after the colon is the separator's.
  CHECK(FeedAll({"data:  x\n\n"}) == std::vector<std::string>{" x"});
  // A blank line with no data before it is no event.
  CHECK(FeedAll({"\n\n\n"}).empty());
}

TEST_CASE("SSE: an event the stream ends in still counts once it is finished", "[sse]") {
  CHECK(FeedAll({"data: a\n\ndata: b"}, false) == std::vector<std::string>{"a"});
  CHECK(FeedAll({"data: a\n\ndata: b"}) == std::vector<std::string>{"a", "b"});
  CHECK(FeedAll({"data: a\n\ndata: b\n"}) == std::vector<std::string>{"a", "b"});
}

TEST_CASE("SSE: an event over 1MiB is an error, not memory", "[sse]") {
  SseParser parser;
  std::vector<std::string> events;
  std::string line = "data: " + std::string(kMaxSseEventBytes, 'x');
  Status s = parser.Feed(line, events);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message() == "a streamed event is larger than 1MiB");
  // Many lines of one event count together.
  SseParser many;
  std::string chunk = "data: " + std::string(1000, 'y') + "\n";
  Status fed = Status::Ok();
  for (int i = 0; i < 2000 && fed.ok(); ++i) fed = many.Feed(chunk, events);
  CHECK_FALSE(fed.ok());
  CHECK(events.empty());
}

TEST_CASE("completion chunks: text, chat deltas, usage, [DONE]", "[sse]") {
  auto done = ReadCompletionChunk("[DONE]");
  REQUIRE(done.ok());
  CHECK(done->done);

  auto text = ReadCompletionChunk(
      R"({"id":"cmpl-1","object":"text_completion","choices":[{"index":0,"text":" Paris","finish_reason":null}],"usage":null})");
  REQUIRE(text.ok());
  CHECK_FALSE(text->done);
  CHECK(text->text == " Paris");
  CHECK_FALSE(text->completion_tokens.has_value());

  auto chat = ReadCompletionChunk(
      R"({"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"4","reasoning_content":"two and two"}}]})");
  REQUIRE(chat.ok());
  CHECK(chat->text == "4");
  CHECK(chat->reasoning == "two and two");

  auto role = ReadCompletionChunk(R"({"choices":[{"delta":{"role":"assistant","content":null}}]})");
  REQUIRE(role.ok());
  CHECK(role->text.empty());

  auto usage = ReadCompletionChunk(
      R"({"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":128,"total_tokens":133}})");
  REQUIRE(usage.ok());
  CHECK(usage->completion_tokens == 128);
  CHECK(usage->text.empty());
}

TEST_CASE("completion chunks: errors in the stream, and what is not a chunk", "[sse]") {
  auto nested = ReadCompletionChunk(
      R"({"error":{"object":"error","message":"The model `x` does not exist.","code":404}})");
  REQUIRE(nested.ok());
  CHECK(nested->error == "The model `x` does not exist.");
  auto old = ReadCompletionChunk(R"({"object":"error","message":"EngineCore died"})");
  REQUIRE(old.ok());
  CHECK(old->error == "EngineCore died");
  auto plain = ReadCompletionChunk(R"({"error":"overloaded"})");
  REQUIRE(plain.ok());
  CHECK(plain->error == "overloaded");

  auto garbage = ReadCompletionChunk("<html>502 Bad Gateway</html>");
  REQUIRE_FALSE(garbage.ok());
  CHECK(garbage.status().message() == "not a JSON chunk: <html>502 Bad Gateway</html>");
  auto array = ReadCompletionChunk("[1, 2]");
  REQUIRE_FALSE(array.ok());
  CHECK(array.status().message() == "not a JSON chunk: [1, 2]");
}
