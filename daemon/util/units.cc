#include "util/units.h"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdio>
#include <limits>

namespace deployd {

using Duration = std::chrono::milliseconds;

namespace {

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

}  // namespace

std::optional<std::int64_t> ParseInteger(std::string_view s) {
  std::int64_t value = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

std::optional<Duration> ParseDuration(std::string_view text) {
  struct Unit {
    std::string_view name;
    std::int64_t ms;
  };
  static constexpr std::array<Unit, 5> kUnits = {
      {{"d", 86'400'000}, {"h", 3'600'000}, {"m", 60'000}, {"s", 1'000}, {"ms", 1}}};
  if (text.empty()) return std::nullopt;
  std::int64_t total = 0;
  std::int64_t previous_unit = std::numeric_limits<std::int64_t>::max();
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t start = i;
    while (i < text.size() && IsDigit(text[i])) ++i;
    std::optional<std::int64_t> whole = ParseInteger(text.substr(start, i - start));
    if (!whole) return std::nullopt;
    // A fraction ("1.5s") is allowed so that FormatDuration's output parses; digits past the
    // sixth are below a millisecond for every unit but days, so they are ignored.
    std::int64_t fraction = 0;
    std::int64_t scale = 1;
    if (i < text.size() && text[i] == '.') {
      std::size_t digits_start = ++i;
      for (; i < text.size() && IsDigit(text[i]); ++i) {
        if (scale < 1'000'000) {
          fraction = fraction * 10 + (text[i] - '0');
          scale *= 10;
        }
      }
      if (i == digits_start) return std::nullopt;
    }
    start = i;
    while (i < text.size() && IsAlpha(text[i])) ++i;
    std::string_view name = text.substr(start, i - start);
    auto unit =
        std::find_if(kUnits.begin(), kUnits.end(), [&](const Unit& u) { return u.name == name; });
    // Units must get smaller ("1h30m", not "30m1h" or "1m1m"): one way to write each value.
    if (unit == kUnits.end() || unit->ms >= previous_unit) return std::nullopt;
    previous_unit = unit->ms;
    std::int64_t part = 0;
    if (__builtin_mul_overflow(*whole, unit->ms, &part) ||
        __builtin_add_overflow(part, fraction * unit->ms / scale, &part) ||
        __builtin_add_overflow(total, part, &total))
      return std::nullopt;
  }
  return Duration(total);
}

std::optional<std::uint64_t> ParseSize(std::string_view text) {
  struct Unit {
    std::string_view name;
    std::uint64_t bytes;
  };
  // Every unit FormatSize prints, so that what deployd prints can be typed back.
  static constexpr std::array<Unit, 15> kUnits = {{{"", 1},
                                                   {"B", 1},
                                                   {"kB", 1'000},
                                                   {"KB", 1'000},
                                                   {"MB", 1'000'000},
                                                   {"GB", 1'000'000'000},
                                                   {"TB", 1'000'000'000'000},
                                                   {"PB", 1'000'000'000'000'000},
                                                   {"EB", 1'000'000'000'000'000'000},
                                                   {"KiB", 1ULL << 10},
                                                   {"MiB", 1ULL << 20},
                                                   {"GiB", 1ULL << 30},
                                                   {"TiB", 1ULL << 40},
                                                   {"PiB", 1ULL << 50},
                                                   {"EiB", 1ULL << 60}}};
  std::size_t i = 0;
  while (i < text.size() && IsDigit(text[i])) ++i;
  if (i == 0) return std::nullopt;
  std::uint64_t whole = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + i, whole);
  if (ec != std::errc()) return std::nullopt;
  // A fraction ("1.5GiB") is rounded down to whole bytes; six digits are plenty.
  std::uint64_t fraction = 0;
  std::uint64_t scale = 1;
  bool has_fraction = false;
  if (i < text.size() && text[i] == '.') {
    std::size_t digits_start = ++i;
    for (; i < text.size() && IsDigit(text[i]); ++i) {
      if (scale < 1'000'000) {
        fraction = fraction * 10 + static_cast<std::uint64_t>(text[i] - '0');
        scale *= 10;
      }
    }
    if (i == digits_start) return std::nullopt;
    has_fraction = true;
  }
  std::string_view name = text.substr(i);
  auto unit =
      std::find_if(kUnits.begin(), kUnits.end(), [&](const Unit& u) { return u.name == name; });
  // A fraction of a byte means nothing.
  if (unit == kUnits.end() || (has_fraction && unit->bytes == 1)) return std::nullopt;
  std::uint64_t bytes = 0;
  if (__builtin_mul_overflow(whole, unit->bytes, &bytes) ||
      __builtin_add_overflow(bytes, fraction * unit->bytes / scale, &bytes))
    return std::nullopt;
  return bytes;
}

std::string FormatDuration(Duration d) {
  std::int64_t count = d.count();
  if (count == 0) return "0s";
  std::string sign = count < 0 ? "-" : "";
  // Unsigned so that the most negative value negates without overflow.
  std::uint64_t ms = static_cast<std::uint64_t>(count);
  if (count < 0) ms = 0 - ms;
  if (ms < 1000) return sign + std::to_string(ms) + "ms";
  std::uint64_t hours = ms / 3'600'000;
  std::uint64_t minutes = ms / 60'000 % 60;
  std::uint64_t seconds = ms / 1000 % 60;
  std::uint64_t millis = ms % 1000;
  auto two_digits = [](std::uint64_t n) { return (n < 10 ? "0" : "") + std::to_string(n); };
  std::string fraction;
  if (millis != 0) {
    fraction = std::to_string(millis + 1000).substr(1);  // "050"
    while (fraction.back() == '0') fraction.pop_back();
    fraction = "." + fraction;
  }
  if (hours == 0 && minutes == 0) return sign + std::to_string(seconds) + fraction + "s";
  std::string out = sign;
  if (hours != 0) out += std::to_string(hours) + "h";
  bool has_seconds = seconds != 0 || millis != 0;
  if (minutes != 0 || has_seconds)
    out += (hours != 0 ? two_digits(minutes) : std::to_string(minutes)) + "m";
  if (has_seconds) out += two_digits(seconds) + fraction + "s";
  return out;
}

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
    // The largest sizes would round up to 16.0EiB, which does not fit in 64 bits to be typed
    // back: they are shown rounded down.
    double value = static_cast<double>(bytes) / scale;
    if (unit == 6) value = std::min(value, 15.9);
    std::snprintf(text, sizeof text, "%.1f%s", value, kUnits[unit]);
  }
  return text;
}

}  // namespace deployd
