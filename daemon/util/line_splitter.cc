#include "util/line_splitter.h"

namespace deployd {

void LineSplitter::Feed(std::string_view data, const LineHandler& on_line) {
  size_t start = 0;
  for (size_t i = 0; i < data.size(); ++i) {
    if (data[i] != '\n' && data[i] != '\r') {
      if (partial_.size() + (i + 1 - start) < kMaxLineBytes) continue;
      // Cut an endless line: whatever follows is matched as lines of its own.
      partial_.append(data.substr(start, i + 1 - start));
      start = i + 1;
      Flush(on_line);
      continue;
    }
    std::string_view piece = data.substr(start, i - start);
    start = i + 1;
    if (partial_.empty()) {
      if (!piece.empty()) on_line(piece);
      continue;
    }
    partial_.append(piece);
    Flush(on_line);
  }
  partial_.append(data.substr(start));
}

void LineSplitter::Flush(const LineHandler& on_line) {
  if (partial_.empty()) return;
  std::string line = std::move(partial_);
  partial_.clear();
  on_line(line);
}

}  // namespace deployd
