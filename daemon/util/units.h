// Units of the plan format and of deployd's messages: durations ("500ms", "1h30m") and sizes
// ("512MiB", "600GiB", "1GB"), parsed and formatted so that what is printed parses back.
#ifndef DEPLOYD_UTIL_UNITS_H_
#define DEPLOYD_UTIL_UNITS_H_

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deployd {

// A whole decimal number, all of `s` (no sign, space or unit); nullopt on overflow.
std::optional<std::int64_t> ParseInteger(std::string_view s);

// Durations: an integer with a unit, or several ("500ms", "15s", "10m", "8h", "1h30m").
std::optional<std::chrono::milliseconds> ParseDuration(std::string_view text);
// "1.5s", "250ms", "2m03s" — the inverse of ParseDuration, for messages.
std::string FormatDuration(std::chrono::milliseconds d);

// Sizes: an integer with an optional unit: B, kB/KB, MB, GB, TB, PB, EB (powers of 1000),
// KiB, MiB, GiB, TiB, PiB, EiB (powers of 1024). A bare integer is bytes. Whatever FormatSize
// prints parses.
std::optional<std::uint64_t> ParseSize(std::string_view text);
// Byte counts for messages, in binary units ("12.3GiB", "600GiB", "512B"), one decimal unless
// the value is whole in its unit: 1536 → "1.5KiB", 1024 → "1KiB".
std::string FormatSize(std::uint64_t bytes);

}  // namespace deployd

#endif  // DEPLOYD_UTIL_UNITS_H_
