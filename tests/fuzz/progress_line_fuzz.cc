// A step's output as the progress watch reads it: cut into lines by LineSplitter (at '\n' and
// '\r', long lines cut), each line through ParseProgressLine. A reading's fraction is within
// 0..1 and done <= total, as progress_line.h promises (else abort, a finding).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "checks/progress_line.h"
#include "util/line_splitter.h"

using namespace deployd;

namespace {

void Read(std::string_view line) {
  std::optional<ProgressReading> r = ParseProgressLine(line);
  if (!r) return;
  if (!(r->fraction >= 0 && r->fraction <= 1)) std::abort();
  if (r->done.has_value() != r->total.has_value()) std::abort();
  if (r->done && !(*r->done >= 0 && *r->done <= *r->total)) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  LineSplitter splitter;
  splitter.Feed(text, Read);
  splitter.Flush(Read);
  return 0;
}
