// A stream's lines held to a byte budget (control/stream_queue.h): what a client that does not
// read costs, and what it is told when it reads again.
#include "control/stream_queue.h"

#include <boost/json.hpp>
#include <catch2/catch.hpp>

using namespace deployd;
namespace json = boost::json;

namespace {

json::object Event(std::int64_t seq) {
  WireEvent e;
  e.run = "a-1";
  e.seq = seq;
  e.kind = "step.state";
  e.state = "running";
  e.detail = std::string(100, 'x');
  return EncodeEvent(e);
}

json::object Parse(const StreamLine& line) { return json::parse(line.text).as_object(); }

}  // namespace

TEST_CASE("stream queue: lines pass as they are while the client keeps up") {
  StreamQueue queue(1000);
  queue.Push(Event(1));
  queue.Push(Event(2));
  CHECK(queue.bytes() == json::serialize(Event(1)).size() + json::serialize(Event(2)).size());
  std::deque<StreamLine> lines = queue.Take();
  REQUIRE(lines.size() == 2);
  CHECK(DecodeEvent(Parse(lines[0])).seq == 1);
  CHECK(DecodeEvent(Parse(lines[1])).seq == 2);
  CHECK_FALSE(lines[1].last);
  CHECK_FALSE(queue.missed_events());
  CHECK(queue.empty());
  CHECK(queue.bytes() == 0);
}

TEST_CASE("stream queue: past the budget, lines are counted, not kept") {
  const size_t one = json::serialize(Event(1)).size();
  StreamQueue queue(3 * one);
  for (int seq = 1; seq <= 1000; ++seq) queue.Push(Event(seq));
  queue.Push(EncodeProgressLine("a-1", "fetch", WireProgress{}));
  queue.Push(EncodeLogData("12345"));
  // What is kept stops at the budget, however much comes.
  CHECK(queue.bytes() == 3 * one);
  std::deque<StreamLine> lines = queue.Take();
  REQUIRE(lines.size() == 4);
  CHECK(DecodeEvent(Parse(lines[2])).seq == 3);
  json::object notice = Parse(lines[3]);
  CHECK(LineType(notice) == "missed");
  WireMissed missed = DecodeMissed(notice);
  CHECK(missed.events == 997);
  CHECK(missed.first_seq == 4);
  CHECK(missed.last_seq == 1000);
  CHECK(missed.progress == 1);
  CHECK(missed.bytes == 5);
  CHECK(DescribeMissed(missed) == "997 events (seq 4–1000), 1 progress update and 5B of output");
  CHECK(queue.missed_events());
  // Once taken, the client is back within its budget.
  queue.Push(Event(1001));
  lines = queue.Take();
  REQUIRE(lines.size() == 1);
  CHECK(DecodeEvent(Parse(lines[0])).seq == 1001);
  CHECK_FALSE(queue.missed_events());
}

TEST_CASE("stream queue: the first line kept on purpose and the last line always get through") {
  StreamQueue queue(10);
  queue.Push(EncodeLogStart("a-1", "s", "/log"), /*keep=*/true);
  queue.Push(EncodeLogData("0123456789"));
  queue.Push(EncodeLogStart("a-1", "s", "/log"), /*keep=*/true);
  queue.Push(EncodeLogEnd("a-1", "s", "succeeded"));
  std::deque<StreamLine> lines = queue.Take();
  REQUIRE(lines.size() == 4);
  CHECK(LineType(Parse(lines[0])) == "start");
  CHECK(DecodeMissed(Parse(lines[1])).bytes == 10);
  CHECK(LineType(Parse(lines[2])) == "start");
  CHECK(lines[3].last);
  CHECK_FALSE(queue.missed_events());
}

TEST_CASE("stream queue: what a notice says") {
  CHECK(DescribeMissed({1, 7, 7, 0, 0, 0}) == "1 event (seq 7)");
  CHECK(DescribeMissed({0, 0, 0, 0, 8u << 20, 0}) == "8MiB of output");
  CHECK(DescribeMissed({0, 0, 0, 2, 0, 1}) == "2 progress updates and 1 other line");
  CHECK(DescribeMissed({}) == "nothing");
}

TEST_CASE("stream queue: a progress line replaces its step's that still waits") {
  StreamQueue queue(10'000);
  WireProgress p;
  for (int i = 1; i <= 1000; ++i) {
    p.done = i;
    queue.Push(EncodeProgressLine("a-1", "fetch", p));
    queue.Push(EncodeProgressLine("a-1", "other", p));
  }
  queue.Push(Event(5));
  std::deque<StreamLine> lines = queue.Take();
  REQUIRE(lines.size() == 3);
  CHECK(ProgressLineStep(Parse(lines[0])) == "fetch");
  CHECK(DecodeProgress(Parse(lines[0])).done == 1000);
  CHECK(ProgressLineStep(Parse(lines[1])) == "other");
  CHECK(DecodeEvent(Parse(lines[2])).seq == 5);
  // Taken: the next sample is a line of its own again.
  queue.Push(EncodeProgressLine("a-1", "fetch", p));
  CHECK(queue.Take().size() == 1);
}
