// The follower of a growing log, on a real file and a real inotify descriptor.
#include "log_follower.h"

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace deployd;

namespace {

struct TempDir {
  TempDir() {
    char pattern[] = "/tmp/log-follower-XXXXXX";
    path = ::mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string path;
};

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::app) << text;
}

// Runs the io_context until `done()` holds (bounded: a broken follower fails, not hangs).
template <typename Predicate>
bool RunUntil(boost::asio::io_context& io, Predicate done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done() && std::chrono::steady_clock::now() < deadline) {
    io.run_one_for(std::chrono::milliseconds(20));
    if (io.stopped()) io.restart();
  }
  return done();
}

}  // namespace

TEST_CASE("LogFollower: what is there past the offset, then what is appended") {
  TempDir dir;
  std::string log = dir.path + "/step.log";
  Append(log, "old\nnew1\n");
  boost::asio::io_context io;
  std::string seen;
  auto follower =
      LogFollower::Start(io.get_executor(), log, 4, [&](std::string_view d) { seen += d; });
  REQUIRE(follower.ok());
  CHECK(seen.empty());  // never from Start()
  REQUIRE(RunUntil(io, [&] { return seen == "new1\n"; }));
  Append(log, "new2\n");
  REQUIRE(RunUntil(io, [&] { return seen == "new1\nnew2\n"; }));
  CHECK(follower.value()->offset() == 14);
}

TEST_CASE("LogFollower: a file created later, rotated, truncated") {
  TempDir dir;
  std::string log = dir.path + "/step.log";
  boost::asio::io_context io;
  std::string seen;
  auto follower =
      LogFollower::Start(io.get_executor(), log, 0, [&](std::string_view d) { seen += d; });
  REQUIRE(follower.ok());
  Append(log, "a\n");
  REQUIRE(RunUntil(io, [&] { return seen == "a\n"; }));
  // Rotation as ChildProcess does it: the old file's rest, then the new file from its start.
  Append(log, "b\n");
  std::filesystem::rename(log, log + ".1");
  Append(log, "c\n");
  REQUIRE(RunUntil(io, [&] { return seen == "a\nb\nc\n"; }));
  // Truncation (seen when the file is shorter than what was delivered): read again from the
  // start.
  Append(log, "more\n");
  REQUIRE(RunUntil(io, [&] { return seen == "a\nb\nc\nmore\n"; }));
  std::ofstream(log, std::ios::binary | std::ios::trunc) << "d\n";
  REQUIRE(RunUntil(io, [&] { return seen == "a\nb\nc\nmore\nd\n"; }));
}

TEST_CASE("LogFollower: CatchUp delivers at once; nothing after Stop") {
  TempDir dir;
  std::string log = dir.path + "/step.log";
  boost::asio::io_context io;
  std::string seen;
  std::unique_ptr<LogFollower> follower;
  auto started = LogFollower::Start(io.get_executor(), log, 0, [&](std::string_view d) {
    seen += d;
    if (seen.find("stop") != std::string::npos) follower.reset();  // from its own callback
  });
  REQUIRE(started.ok());
  follower = std::move(started.value());
  io.poll();
  Append(log, "x\n");
  follower->CatchUp();
  CHECK(seen == "x\n");
  Append(log, "stop\n");
  REQUIRE(RunUntil(io, [&] { return follower == nullptr; }));
  Append(log, "after\n");
  io.run_for(std::chrono::milliseconds(100));
  CHECK(seen == "x\nstop\n");
}

TEST_CASE("LogFollower: a directory that does not exist is an error") {
  boost::asio::io_context io;
  auto follower = LogFollower::Start(io.get_executor(), "/nonexistent/dir/step.log", 0,
                                     [](std::string_view) {});
  REQUIRE_FALSE(follower.ok());
  CHECK(follower.status().message() == "cannot watch /nonexistent/dir: No such file or directory");
}
