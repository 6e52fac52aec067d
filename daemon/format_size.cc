#include "format_size.h"

#include <cstdio>

namespace deployd {

std::string FormatSize(std::uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  std::uint64_t scale = 1;
  while (unit + 1 < 7 && bytes / scale >= 1024) {
    scale *= 1024;
    ++unit;
  }
  char text[32];
  if (bytes % scale == 0) {
    std::snprintf(text, sizeof text, "%llu%s", static_cast<unsigned long long>(bytes / scale),
                  kUnits[unit]);
  } else {
    std::snprintf(text, sizeof text, "%.1f%s", static_cast<double>(bytes) / scale, kUnits[unit]);
  }
  return text;
}

}  // namespace deployd
