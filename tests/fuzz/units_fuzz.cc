// Durations and sizes (util/units.h) on any text, and what deployd prints of them read back:
// units.h promises that every FormatDuration and FormatSize parses (else abort, a finding).
// The first 8 bytes also give a raw value, so that formatting sees every magnitude.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "util/units.h"

using namespace deployd;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)ParseInteger(text);
  if (std::optional<std::chrono::milliseconds> d = ParseDuration(text)) {
    if (!ParseDuration(FormatDuration(*d))) std::abort();
  }
  if (std::optional<std::uint64_t> s = ParseSize(text)) {
    if (!ParseSize(FormatSize(*s))) std::abort();
  }
  if (size >= sizeof(std::uint64_t)) {
    std::uint64_t raw;
    std::memcpy(&raw, data, sizeof raw);
    if (!ParseSize(FormatSize(raw))) std::abort();
    std::int64_t ms = static_cast<std::int64_t>(raw >> 1);
    (void)ParseDuration(FormatDuration(std::chrono::milliseconds(ms)));
  }
  return 0;
}
