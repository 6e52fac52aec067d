#include "checks/progress_watch.h"

#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

using namespace deployd;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  TempDir() {
    char tmpl[] = "/tmp/progress-watch-test-XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() { fs::remove_all(path); }
  void Write(const std::string& name, size_t bytes) const {
    fs::path p = fs::path(path) / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary | std::ios::app) << std::string(bytes, 'x');
  }
  std::string path;
};

ProgressSpec Spec(Duration stall_after, Duration every, std::string path = "") {
  ProgressSpec spec;
  spec.path = std::move(path);
  spec.stall_after = stall_after;
  spec.every = every;
  return spec;
}

}  // namespace

TEST_CASE("bytes under a path: every regular file, hidden and partial ones too") {
  TempDir dir;
  CHECK(BytesUnder(dir.path) == 0);
  dir.Write("config.json", 100);
  dir.Write(".hidden", 20);
  dir.Write("sub/deeper/model-00001-of-00002.safetensors", 3000);
  dir.Write(".cache/huggingface/download/model-00002-of-00002.safetensors.abc123.incomplete", 4000);
  CHECK(BytesUnder(dir.path) == 7120);
  // A symbolic link is not followed: a Hugging Face cache links snapshots to its blobs.
  fs::create_symlink(dir.path + "/sub", dir.path + "/link-to-sub");
  fs::create_symlink(dir.path + "/config.json", dir.path + "/link-to-config.json");
  CHECK(BytesUnder(dir.path) == 7120);
  // A partial file moved into place changes nothing; growing does.
  fs::rename(dir.path +
                 "/.cache/huggingface/download/"
                 "model-00002-of-00002.safetensors.abc123.incomplete",
             dir.path + "/model-00002-of-00002.safetensors");
  CHECK(BytesUnder(dir.path) == 7120);
  dir.Write("model-00002-of-00002.safetensors", 5);
  CHECK(BytesUnder(dir.path) == 7125);
  // A path that is one file, and one that does not exist (yet).
  CHECK(BytesUnder(dir.path + "/config.json") == 100);
  CHECK(BytesUnder(dir.path + "/not-there") == 0);
}

TEST_CASE("bytes are formatted for messages") {
  CHECK(FormatBytes(0) == "0B");
  CHECK(FormatBytes(1023) == "1023B");
  CHECK(FormatBytes(1024) == "1KiB");
  CHECK(FormatBytes(1536) == "1.5KiB");
  CHECK(FormatBytes(1288490189) == "1.2GiB");
  CHECK(FormatBytes(600ull << 30) == "600GiB");
}

TEST_CASE("tracker: bytes that grow are progress, bytes already there are not") {
  ProgressTracker t(Spec(10'000ms, 1'000ms, "/x"), 0, 5000);
  CHECK(t.TakeChanged());  // the first sample is news
  CHECK_FALSE(t.Sample(1'000, 5000));
  CHECK_FALSE(t.TakeChanged());
  CHECK(t.Sample(2'000, 6000));
  CHECK(t.TakeChanged());
  CHECK_FALSE(t.StalledFor(11'999));
  CHECK(t.StalledFor(12'000) == 10'000);
  // Shrinking (a partial file deleted) is a change, not progress; growing again is.
  CHECK_FALSE(t.Sample(3'000, 100));
  CHECK(t.TakeChanged());
  CHECK(t.Sample(4'000, 200));
  CHECK(t.Snapshot(4'000).last_progress_at_ms == 4'000);
}

TEST_CASE("tracker: rate over the sliding window, fraction and ETA from a known total") {
  ProgressSpec spec = Spec(60'000ms, 5'000ms, "/x");
  spec.total = 1'000'000;
  ProgressTracker t(spec, 0, 0);
  ProgressSnapshot s = t.Snapshot(0);
  CHECK_FALSE(s.rate_bps);  // one sample: no rate yet
  CHECK(s.fraction == 0.0);
  CHECK_FALSE(s.eta_s);
  for (int i = 1; i <= 4; ++i) t.Sample(i * 5'000, i * 50'000);  // 10000 B/s
  s = t.Snapshot(20'000);
  CHECK(s.bytes == 200'000u);
  CHECK(s.total_bytes == 1'000'000u);
  CHECK(*s.rate_bps == Approx(10'000));
  CHECK(*s.fraction == Approx(0.2));
  CHECK(*s.eta_s == Approx(80));  // 800000 B left at 10000 B/s
  // The window is the last 30 s: a fast start falls out of it.
  for (int i = 5; i <= 12; ++i) t.Sample(i * 5'000, 200'000 + (i - 4) * 5'000);  // 1000 B/s
  s = t.Snapshot(60'000);
  CHECK(*s.rate_bps == Approx(1'000));
  CHECK(*s.eta_s == Approx(760));
  // Done: no time left.
  t.Sample(65'000, 1'000'000);
  CHECK(t.Snapshot(65'000).eta_s == 0.0);
}

TEST_CASE("tracker: progress lines; only a bar that advances is progress") {
  ProgressTracker t(Spec(10'000ms, 1'000ms), 0, std::nullopt);
  CHECK_FALSE(t.Line(100, "Downloading weights"));
  CHECK(t.Snapshot(100).last_line == "Downloading weights");
  CHECK_FALSE(t.Snapshot(100).fraction);
  CHECK(t.Line(200, "Fetching 140 files:   6%|▌         | 8/140 [00:01<00:20,  6.5it/s]"));
  t.TakeChanged();
  // tqdm redraws the same numbers with a new elapsed time: not progress, not news.
  CHECK_FALSE(t.Line(300, "Fetching 140 files:   6%|▌         | 8/140 [00:02<00:21,  6.4it/s]"));
  CHECK_FALSE(t.TakeChanged());
  CHECK(t.Line(400, "Fetching 140 files:   6%|▋         | 9/140 [00:03<00:20,  6.5it/s]"));
  ProgressSnapshot s = t.Snapshot(400);
  CHECK(s.done == 9.0);
  CHECK(s.total == 140.0);
  CHECK(*s.fraction == Approx(9.0 / 140));
  CHECK_FALSE(s.bytes);
  CHECK_FALSE(s.rate_bps);
  CHECK(s.last_progress_at_ms == 400);
  // Bars of two files interleave: each advances on its own, and a new one is progress.
  CHECK(t.Line(500, "a.safetensors:  45%|████▌     | 2.25G/5.00G [01:23<01:42, 26.8MB/s]"));
  CHECK(t.Line(600, "b.safetensors:   1%|          | 50.0M/5.00G [00:01<01:42, 26.8MB/s]"));
  CHECK(t.Line(700, "a.safetensors:  46%|████▌     | 2.30G/5.00G [01:24<01:41, 26.8MB/s]"));
  CHECK_FALSE(t.Line(800, "b.safetensors:   1%|          | 50.0M/5.00G [00:02<01:43, 0B/s]"));
  CHECK_FALSE(t.StalledFor(10'699));
  CHECK(t.StalledFor(10'700) == 10'000);
}

TEST_CASE("tracker: the ETA from the pace of the fraction when no total is known") {
  ProgressTracker t(Spec(60'000ms, 1'000ms), 0, std::nullopt);
  t.Line(0, "Loading safetensors checkpoint shards:  10% Completed | 6/60 [00:10<01:30]");
  t.Sample(1'000, std::nullopt);
  t.Line(10'500, "Loading safetensors checkpoint shards:  20% Completed | 12/60 [00:20<01:20]");
  t.Sample(11'000, std::nullopt);  // 0.1 in 10 s
  ProgressSnapshot s = t.Snapshot(11'000);
  CHECK(*s.fraction == Approx(0.2));
  CHECK(*s.eta_s == Approx(80));
}

TEST_CASE("watch: samples a real directory on its timer and reports a stall once") {
  TempDir dir;
  dir.Write(".cache/huggingface/download/a.incomplete", 10);
  boost::asio::io_context io;
  int changes = 0;
  int stalls = 0;
  ProgressSnapshot stalled;
  std::int64_t stalled_for = 0;
  auto watch = ProgressWatch::Start(
      io.get_executor(), Spec(600ms, 100ms, dir.path), [&](const ProgressSnapshot&) { ++changes; },
      [&](const ProgressSnapshot& s, std::int64_t idle) {
        ++stalls;
        stalled = s;
        stalled_for = idle;
      });
  // Grow the partial file for a while, then stop (the writer stays "alive").
  boost::asio::steady_timer grow(io);
  int grown = 0;
  std::function<void()> step = [&] {
    dir.Write(".cache/huggingface/download/a.incomplete", 1000);
    if (++grown < 5) {
      grow.expires_after(100ms);
      grow.async_wait([&](boost::system::error_code) { step(); });
    }
  };
  step();
  auto start = std::chrono::steady_clock::now();
  io.run_for(3s);
  CHECK(stalls == 1);
  CHECK(changes >= 2);
  CHECK(stalled.bytes == 5010u);
  CHECK(stalled_for >= 600);
  CHECK(stalled.last_progress_at_ms <= stalled.at_ms - 600);
  CHECK(std::chrono::steady_clock::now() - start < 3s + 500ms);
  CHECK(watch->Snapshot().bytes == 5010u);
}

TEST_CASE("watch: progress lines keep it from stalling; Stop() silences it") {
  boost::asio::io_context io;
  int stalls = 0;
  auto watch = ProgressWatch::Start(io.get_executor(), Spec(1000ms, 100ms), nullptr,
                                    [&](const ProgressSnapshot&, std::int64_t) { ++stalls; });
  boost::asio::steady_timer feed(io);
  int n = 0;
  std::function<void()> step = [&] {
    watch->OnLine("[" + std::to_string(++n) + "/100] loading");
    if (n < 10) {
      feed.expires_after(50ms);
      feed.async_wait([&](boost::system::error_code) { step(); });
    }
  };
  step();
  io.run_for(800ms);  // 10 lines over 450ms, and no stall before 1450ms
  CHECK(stalls == 0);
  CHECK(watch->Snapshot().done == 10.0);
  watch->Stop();
  io.restart();
  io.run_for(1500ms);
  CHECK(stalls == 0);
}
