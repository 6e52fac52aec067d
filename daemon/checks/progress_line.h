// ProgressLine: recognises progress in one line of a step's output (a pure function, no state).
//
// Progress bars are written for people, in many dialects; this reads the common ones:
//   Fetching 140 files:   6%|▌         | 8/140 [00:01<00:20,  6.5it/s]      (tqdm)
//   model.safetensors:  45%|████▌     | 2.25G/5.00G [01:23<01:42, 26.8MB/s]  (tqdm, bytes)
//   Loading safetensors checkpoint shards:  45% Completed | 27/60 [00:10<…]  (vLLM)
//   ━━━━━━━━━━━━━━━━━━━╸━━━━━━━━━━━━━━━━━━━━ 453.6/906.4 MB 45.2 MB/s      (pip)
//   torch      ------------------------------ 120.00 MiB/800.00 MiB          (uv)
//   [ 45%] Building CXX object …   [12/340] Building …   Download progress: 45%
//
// Numbers alone are everywhere in logs ("version 1.2/3", "HTTP/1.1", "2024/05/12", "GPU KV
// cache usage: 12.5%"), so a token counts only in a place that only progress takes:
//   - `N/M`: whole numbers, N <= M, M > 0, not glued to letters, digits, '.', '/' or ':' on
//     either side; and either right after a '|' (a tqdm bar), or alone inside [ ] or ( ), or
//     written with a size unit (`2.25G/5.00G`, `453.6/906.4 MB`: decimals need a unit).
//   - `NN%` / `NN.N%` (at most 100): right before a '|' (tqdm), alone inside [ ], at the start
//     of the line, or after the word "progress".
//   - a line that holds both a `%` and an `N/M` (neither in such a place) counts too:
//     "Loading: 45% 27/60".
// `\r`-separated redraws arrive as separate lines (ChildProcess splits on both).
#ifndef DEPLOYD_CHECKS_PROGRESS_LINE_H_
#define DEPLOYD_CHECKS_PROGRESS_LINE_H_

#include <optional>
#include <string>
#include <string_view>

namespace deployd {

struct ProgressReading {
  // From `N/M`: units done and total (sizes converted to bytes: k, M, G, T are powers of 1000,
  // Ki, Mi, Gi, Ti of 1024, as tqdm and pip print them).
  std::optional<double> done;
  std::optional<double> total;
  double fraction = 0;  // 0..1: done/total when known, else the percentage
  // Which bar this is: the last word before the progress that has a letter in it ("files",
  // "model-00001-of-00064.safetensors"; "" if none). Several bars can share an output (one per
  // file); each advances on its own. Not the whole prefix: a log line's timestamp would make
  // every line a new bar.
  std::string label;
};

std::optional<ProgressReading> ParseProgressLine(std::string_view line);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_PROGRESS_LINE_H_
