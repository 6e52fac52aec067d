// A table of real-looking output lines: what ParseProgressLine reads in each, or that it reads
// nothing (the lines that only look like numbers).
#include "checks/progress_line.h"

#include <catch2/catch.hpp>
#include <cstdio>
#include <string>

using namespace deployd;

namespace {

// "done/total fraction 'label'", "fraction 'label'" without N/M, or "-" for no progress.
std::string Read(std::string_view line) {
  std::optional<ProgressReading> r = ParseProgressLine(line);
  if (!r) return "-";
  char buf[160];
  if (r->done) {
    std::snprintf(buf, sizeof buf, "%.0f/%.0f %.4f '%s'", *r->done, *r->total, r->fraction,
                  r->label.c_str());
  } else {
    std::snprintf(buf, sizeof buf, "%.4f '%s'", r->fraction, r->label.c_str());
  }
  return buf;
}

}  // namespace

TEST_CASE("progress lines: what is read") {
  const std::pair<std::string_view, std::string_view> table[] = {
      // huggingface_hub (tqdm); each \r-separated redraw arrives as its own line.
      {"Fetching 140 files:   6%|▌         | 8/140 [00:01<00:20,  6.5it/s]",
       "8/140 0.0571 'files'"},
      {"Fetching 140 files: 100%|██████████| 140/140 [10:01<00:00,  4.30s/it]",
       "140/140 1.0000 'files'"},
      {"model-00001-of-00064.safetensors:  45%|████▌     | 2.25G/5.00G [01:23<01:42, 26.8MB/s]",
       "2250000000/5000000000 0.4500 'model-00001-of-00064.safetensors'"},
      {"Downloading (…)model.safetensors: 100%|██████████| 548M/548M [00:05<00:00, 98.7MB/s]",
       "548000000/548000000 1.0000 'model.safetensors'"},
      {"config.json: 100%|##########| 1.21k/1.21k [00:00<00:00, 6.50kB/s]",
       "1210/1210 1.0000 'config.json'"},
      // vLLM loading its weights.
      {"Loading safetensors checkpoint shards:  45% Completed | 27/60 [00:10<00:12,  2.60it/s]",
       "27/60 0.4500 'shards'"},
      {"(VllmWorker rank=0 pid=4242) Loading safetensors checkpoint shards:   0% Completed | 0/60 "
       "[00:00<?, ?it/s]",
       "0/60 0.0000 'shards'"},
      // pip and uv (their bars, when they draw them).
      {"   ━━━━━━━━━━━━━━━━━━━╸━━━━━━━━━━━━━━━━━━━━ 453.6/906.4 MB 45.2 MB/s eta 0:00:11",
       "453600000/906400000 0.5004 ''"},
      {"torch      ------------------------------ 120.00 MiB/800.00 MiB",
       "125829120/838860800 0.1500 'torch'"},
      // Build tools and plain messages.
      {"[ 45%] Building CXX object daemon/CMakeFiles/deployd_core.dir/run_manager.cc.o",
       "0.4500 ''"},
      {"[12/340] Building CXX object daemon/CMakeFiles/deployd_core.dir/checks.cc.o",
       "12/340 0.0353 ''"},
      {"Download progress: 45.5%", "0.4550 'progress'"},
      {"2024-05-12 10:00:01 INFO download progress=45%", "0.4500 'progress'"},
      {"  73% done", "0.7300 ''"},
      {"copying shards (3/8)", "3/8 0.3750 'shards'"},
      {"Loading: 45% 27/60", "27/60 0.4500 'Loading'"},
  };
  for (const auto& [line, want] : table) {
    INFO(line);
    CHECK(Read(line) == want);
  }
}

TEST_CASE("progress lines: numbers that are not progress") {
  const std::string_view lines[] = {
      "vllm version 1.2/3",
      "INFO 05-12 10:00:01 [api_server.py:1024] GET /v1/models HTTP/1.1 200 OK",
      "2024/05/12 10:00:01 starting download",
      "Avg prompt throughput: 0.0 tokens/s, Running: 0 reqs, GPU KV cache usage: 12.5%",
      "Using 90% of GPU memory",
      "ratio 3/4 of the weights are quantized",
      "Step 3/8 : RUN apt-get update",
      "the output of printf('%d%%', 50%d)",
      "0.5/1 of the way",
      "[9/8] more done than there is",
      "[1/0] nothing to do",
      "[ 140%] an impossible percentage",
      "paths like /data/1/2/model.bin or a/3/4",
      "speed 26.8MB/s, 6.5it/s",
      "eta 0:00:11",
      "8it [00:01,  6.5it/s]",
      "Tried to allocate 2.00 GiB (GPU 0; 79.11 GiB total capacity; 75.30 GiB already allocated)",
      "uses 5 Minutes/3 GPUs",
      "",
  };
  for (std::string_view line : lines) {
    INFO(line);
    CHECK(Read(line) == "-");
  }
}
