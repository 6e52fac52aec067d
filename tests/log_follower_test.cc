// LogFollower on real files in a temporary directory: what is there first, what is appended,
// a file that appears later, rotation to .1, truncation, and stopping from the callback.
// Also LineSplitter, which cuts the followed bytes into lines.
#include "util/log_follower.h"

#include <stdlib.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "test_support.h"
#include "util/line_splitter.h"

using namespace deployd;
namespace asio = boost::asio;

using deployd::testing::ReadFile;
using deployd::testing::TempDir;

namespace {

void Append(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

// Runs the loop until `done` holds (the test fails after 5 s). Only the test waits like this:
// the follower itself is woken by inotify.
template <typename Predicate>
void RunUntil(asio::io_context& io, Predicate done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (!done()) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    io.restart();
    io.run_one_for(std::chrono::milliseconds(20));
  }
}

// Lets everything already due run, without waiting for anything new.
void Settle(asio::io_context& io) {
  io.restart();
  io.poll();
}

struct Followed {
  std::string data;
  std::unique_ptr<LogFollower> follower;
};

std::unique_ptr<Followed> Follow(asio::io_context& io, const std::string& path,
                                 std::uint64_t offset) {
  auto followed = std::make_unique<Followed>();
  auto started = LogFollower::Start(io.get_executor(), path, offset,
                                    [f = followed.get()](std::string_view d) { f->data += d; });
  INFO((started.ok() ? "" : started.status().message()));
  REQUIRE(started.ok());
  followed->follower = std::move(started.value());
  return followed;
}

std::vector<std::string> Split(const std::vector<std::string>& pieces, bool flush = false) {
  LineSplitter splitter;
  std::vector<std::string> lines;
  auto keep = [&](std::string_view line) { lines.emplace_back(line); };
  for (const auto& piece : pieces) splitter.Feed(piece, keep);
  if (flush) splitter.Flush(keep);
  return lines;
}

}  // namespace

TEST_CASE("the follower delivers what the file holds from the offset, then what is appended") {
  TempDir dir;
  const std::string path = dir.File("step.log");
  Append(path, "before the offset\nafter\n");
  asio::io_context io;
  auto f = Follow(io, path, 18);
  CHECK(f->data.empty());  // nothing from Start() itself
  RunUntil(io, [&] { return f->data == "after\n"; });
  Append(path, "one\n");
  RunUntil(io, [&] { return f->data == "after\none\n"; });
  Append(path, "two, no newline yet");
  RunUntil(io, [&] { return f->data == "after\none\ntwo, no newline yet"; });
  CHECK(f->follower->offset() == 18 + f->data.size());
}

TEST_CASE("a file that does not exist yet is followed from its creation") {
  TempDir dir;
  const std::string path = dir.File("later.log");
  asio::io_context io;
  auto f = Follow(io, path, 0);
  Settle(io);
  CHECK(f->data.empty());
  Append(dir.File("other.log"), "not ours\n");
  Append(path, "first\n");
  RunUntil(io, [&] { return f->data == "first\n"; });
  Append(path, "second\n");
  RunUntil(io, [&] { return f->data == "first\nsecond\n"; });
}

TEST_CASE("rotation to .1: the rest of the old file, then the new one from its start") {
  TempDir dir;
  const std::string path = dir.File("step.log");
  Append(path, "a\n");
  asio::io_context io;
  auto f = Follow(io, path, 0);
  RunUntil(io, [&] { return f->data == "a\n"; });
  // What a writer does (ChildProcess's log cap): write, rename, start a new file.
  Append(path, "b\n");
  REQUIRE(std::rename(path.c_str(), (path + ".1").c_str()) == 0);
  Append(path, "c\n");
  RunUntil(io, [&] { return f->data == "a\nb\nc\n"; });
  Append(path, "d\n");
  RunUntil(io, [&] { return f->data == "a\nb\nc\nd\n"; });
}

TEST_CASE("a truncated file is read again from its start") {
  TempDir dir;
  const std::string path = dir.File("step.log");
  Append(path, "a long first line\n");
  asio::io_context io;
  auto f = Follow(io, path, 0);
  RunUntil(io, [&] { return f->data == "a long first line\n"; });
  { std::ofstream truncate(path, std::ios::trunc); }
  Append(path, "new\n");
  RunUntil(io, [&] { return f->data == "a long first line\nnew\n"; });
}

TEST_CASE("an offset past the end means the file was replaced: it is read from its start") {
  TempDir dir;
  const std::string path = dir.File("step.log");
  Append(path, "short\n");
  asio::io_context io;
  auto f = Follow(io, path, 1000);
  RunUntil(io, [&] { return f->data == "short\n"; });
}

TEST_CASE("the callback may stop the follower or destroy it") {
  TempDir dir;
  const std::string path = dir.File("step.log");
  asio::io_context io;
  int calls = 0;
  std::unique_ptr<LogFollower> follower;
  SECTION("stop") {
    auto started = LogFollower::Start(io.get_executor(), path, 0, [&](std::string_view) {
      ++calls;
      follower->Stop();
    });
    REQUIRE(started.ok());
    follower = std::move(started.value());
  }
  SECTION("destroy") {
    auto started = LogFollower::Start(io.get_executor(), path, 0, [&](std::string_view) {
      ++calls;
      follower.reset();
    });
    REQUIRE(started.ok());
    follower = std::move(started.value());
  }
  Append(path, "x\n");
  RunUntil(io, [&] { return calls == 1; });
  Append(path, "y\n");
  Settle(io);
  io.restart();
  io.run_for(std::chrono::milliseconds(100));
  CHECK(calls == 1);
}

TEST_CASE("a directory that does not exist cannot be followed") {
  asio::io_context io;
  auto started =
      LogFollower::Start(io.get_executor(), "/nonexistent-deployd-dir/step.log", 0, nullptr);
  REQUIRE_FALSE(started.ok());
  CHECK(started.status().message() ==
        "cannot follow /nonexistent-deployd-dir/step.log: No such file or directory");
}

TEST_CASE("ReadLastLines gives the tail of the output from an offset") {
  TempDir dir;
  const std::string path = dir.File("step.log");
  Append(path, "earlier attempt\n");
  Append(path, "1\n2\r3\n4\n5");
  CHECK(ReadLastLines(path, 16, 3) == std::vector<std::string>{"3", "4", "5"});
  CHECK(ReadLastLines(path, 16, 10) == std::vector<std::string>{"1", "2", "3", "4", "5"});
  CHECK(ReadLastLines(path, 0, 10).front() == "earlier attempt");
  CHECK(ReadLastLines(dir.File("missing.log"), 0, 10).empty());
  // More than it reads: the cut line at the start is left out.
  std::string big;
  for (int i = 0; i < 10000; ++i) big += "line " + std::to_string(i) + "\n";
  Append(dir.File("big.log"), big);
  auto tail = ReadLastLines(dir.File("big.log"), 0, 100000);
  CHECK(tail.back() == "line 9999");
  CHECK(tail.front().rfind("line ", 0) == 0);
  CHECK(tail.size() < 10000);
}

TEST_CASE("LineSplitter cuts at \\n and \\r, keeps partial lines, drops empty ones") {
  CHECK(Split({"a\nb\r\nc"}) == std::vector<std::string>{"a", "b"});
  CHECK(Split({"a\nb\r\nc"}, true) == std::vector<std::string>{"a", "b", "c"});
  CHECK(Split({"par", "tial\n", "\n\n", "10%\r20%\r"}) ==
        std::vector<std::string>{"partial", "10%", "20%"});
  std::string endless(LineSplitter::kMaxLineBytes + 10, 'x');
  auto lines = Split({endless + "\n"});
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].size() == LineSplitter::kMaxLineBytes);
  CHECK(lines[1] == std::string(10, 'x'));
}

TEST_CASE("a paused follower delivers nothing more until resumed, then goes on where it was") {
  TempDir dir;
  const std::string path = dir.File("step.log");
  Append(path, std::string(200 * 1024, 'x'));  // more than one piece of 64 KiB
  asio::io_context io;
  std::string data;
  std::unique_ptr<LogFollower> follower;
  auto started = LogFollower::Start(io.get_executor(), path, 0, [&](std::string_view d) {
    data += d;
    follower->Pause();  // a reader that can take one piece at a time
  });
  REQUIRE(started.ok());
  follower = std::move(started.value());
  RunUntil(io, [&] { return !data.empty(); });
  CHECK(data.size() == 64 * 1024);
  CHECK(follower->paused());
  Append(path, "more\n");
  Settle(io);
  CHECK(data.size() == 64 * 1024);  // the file grew, the paused follower waits
  follower->CatchUp();
  CHECK(data.size() == 64 * 1024);
  for (size_t pieces = 2; pieces <= 4; ++pieces) {
    follower->Resume();
    CHECK(data.size() == (pieces - 1) * 64 * 1024);  // posted, not from Resume() itself
    RunUntil(io, [&] { return data.size() > (pieces - 1) * 64 * 1024; });
  }
  CHECK(data == std::string(200 * 1024, 'x') + "more\n");
}
