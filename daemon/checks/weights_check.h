// The `weights_complete` check: is a directory of downloaded model weights complete, judged
// from the files alone (no network), cheapest evidence first.
//
//   1. No `*.incomplete` file anywhere under the directory (huggingface_hub keeps a file in
//      progress as `.cache/huggingface/download/<file>.<etag>.incomplete` and moves it into
//      place only when it is whole).
//   2. Every shard named in the `weight_map` of a `*.safetensors.index.json` (normally
//      `model.safetensors.index.json`; one in a subdirectory names shards relative to itself)
//      is present. In a directory that holds no index, the shards' own names count them:
//      `model-00002-of-00003.safetensors` says there are three, so model-00001…00003 must all
//      be there (a download cut after two shards, with its index not fetched or not published,
//      is not complete). The number is padded as the names present pad it; the count is taken
//      as written (`-of-000163`).
//   3. Every `*.safetensors` file is exactly as long as its header says: 8 bytes of header
//      length (little-endian u64), the JSON header, then the data, whose end is the largest
//      `data_offsets[1]` of its tensors. Only the first 8 + N bytes are read, so a truncated
//      shard is caught in milliseconds; this is the same test safetensors itself makes before
//      failing with `MetadataIncompleteBuffer`.
//   4. When sha256 digests are given, each named file hashes to its digest (OpenSSL,
//      util/sha256.h), up to `parallel_hashes` files at once.
// A directory without any `*.safetensors` file fails ("no *.safetensors files"): this check
// cannot vouch for other formats (GGUF, .bin), and passing on nothing would hide a wrong path.
// Files under the top-level `.cache/` are huggingface_hub's bookkeeping, not shards.
//
// Synchronous and blocking: steps 1-3 touch a few KiB per shard, but step 4 reads every byte
// (minutes for hundreds of GB), so a caller on the io_context must run it elsewhere when
// sha256 is given: the daemon runs it in the `deployd --probe` child (checks.cc), which alone
// asks for parallel_hashes > 1 and so is the only process with hashing threads.
//
// Summaries are "weights DIR: <what was seen>", the first problem in the order above:
//   weights /m: 2 files still downloading (*.incomplete)
//   weights /m: model-00007-of-00010.safetensors named in the index is missing
//   weights /m: 1 of the 3 shards named model-*-of-00003 is missing (no index):
//               model-00003-of-00003.safetensors
//   weights /m: shard model-00003-of-00010.safetensors is truncated (1.2GiB of 4.6GiB)
//   weights /m: 10 shards complete (46.2GiB)
// Evidence: {"check": "weights_complete", "target", "problems": [every problem], "incomplete",
// "incomplete_count", "indexes": [{file, shards, missing}], "numbered": [{name, shards,
// present, missing}] (series checked by their names, with no index), "shards": [{file, size,
// expected_size, status}], "total_bytes", "sha256": [{file, expected, actual, status}]}.
#ifndef DEPLOYD_CHECKS_WEIGHTS_CHECK_H_
#define DEPLOYD_CHECKS_WEIGHTS_CHECK_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <map>
#include <string>

#include "deployd/status.h"

namespace deployd {

struct WeightsCheckOptions {
  // Expected digests (64 hex digits, either case) by path relative to the directory
  // ("model-00001-of-00002.safetensors"). Empty: nothing is hashed.
  std::map<std::string, std::string> sha256;
  // Files hashed at once, each on a thread of its own; 1: one after another on the calling
  // thread. The probe child gives HashParallelism().
  unsigned parallel_hashes = 1;
};

struct WeightsCheckOutcome {
  bool passed = false;
  std::string summary;  // one line, see above
  boost::json::object evidence;
};

// Whatever the directory holds, the answer is an outcome (a missing directory or an
// unreadable file is a failed check). An error Status means the options are unusable: a
// digest that is not 64 hex digits, or a sha256 path that is absolute or has '..'.
Result<WeightsCheckOutcome> CheckWeightsComplete(const std::string& dir,
                                                 const WeightsCheckOptions& options = {});

// The largest header length believed: real headers are a few hundred KiB even for models with
// tens of thousands of tensors; a larger value is garbage, not a header to read into memory.
inline constexpr std::uint64_t kMaxSafetensorsHeader = 100ull << 20;

// The most files the probe child hashes at once. One thread hashes one file at 0.5-0.7 GB/s on
// a loaded core (SHA extensions; 1.65 GB/s from memory); four read 2-3 GB/s together, about
// what a local NVMe disk gives, so more would only compete for the disk and for the CPUs of
// the host's other work.
inline constexpr unsigned kMaxParallelHashes = 4;
// kMaxParallelHashes, or fewer when this process may run on fewer CPUs (sched_getaffinity).
unsigned HashParallelism();

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_WEIGHTS_CHECK_H_
