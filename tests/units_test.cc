// What deployd prints of sizes and durations can be typed back (util/units.h): each value of
// every unit, formatted, parses — to the same value when the text is exact, else to one within
// the rounding of the text.
#include "util/units.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <string>

using namespace deployd;
using Duration = std::chrono::milliseconds;

TEST_CASE("units: every size unit deployd prints parses back") {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint64_t>::max();
  for (std::uint64_t unit = 1; unit != 0 && unit <= (1ULL << 60); unit <<= 10) {
    for (std::uint64_t times : {1ULL, 2ULL, 15ULL, 1023ULL}) {
      std::uint64_t bytes = unit * times;
      INFO(bytes);
      std::string text = FormatSize(bytes);
      CHECK(ParseSize(text) == bytes);  // whole in its unit: exact
    }
    for (std::uint64_t bytes : {unit + unit / 2, unit + 1, 2 * unit - 1}) {
      if (bytes < unit) continue;
      INFO(bytes);
      std::string text = FormatSize(bytes);
      std::optional<std::uint64_t> back = ParseSize(text);
      REQUIRE(back.has_value());
      // Within the rounding of one decimal.
      CHECK((*back > bytes ? *back - bytes : bytes - *back) <= unit / 20 + 1);
    }
  }
  CHECK(FormatSize(1ULL << 50) == "1PiB");
  CHECK(ParseSize("1PiB") == 1ULL << 50);
  CHECK(FormatSize(3ULL << 60) == "3EiB");
  CHECK(ParseSize("3EiB") == 3ULL << 60);
  CHECK(ParseSize("2PB") == 2'000'000'000'000'000ULL);
  CHECK(ParseSize("18EB") == 18'000'000'000'000'000'000ULL);
  CHECK_FALSE(ParseSize("19EB").has_value());  // past 2^64
  // The largest sizes are rounded down, not up to a 16.0EiB that would not fit.
  CHECK(FormatSize(kMax) == "15.9EiB");
  REQUIRE(ParseSize("15.9EiB").has_value());
  CHECK(FormatSize(*ParseSize("15.9EiB")) == "15.9EiB");
  CHECK(FormatSize(1536) == "1.5KiB");
  CHECK(ParseSize("1.5KiB") == 1536);
}

TEST_CASE("units: every duration unit deployd prints parses back, to the millisecond") {
  const std::int64_t ms = 1, s = 1000 * ms, m = 60 * s, h = 60 * m, d = 24 * h;
  for (std::int64_t value : {0 * ms, 1 * ms, 999 * ms, 1 * s, 1 * s + 5 * ms, 59 * s + 999 * ms,
                             1 * m, 1 * m + 3 * s, 59 * m + 59 * s, 1 * h, 1 * h + 30 * m, 1 * d,
                             2 * d + 3 * h + 4 * m + 5 * s + 6 * ms, 365 * d, 110000 * d}) {
    INFO(value);
    std::string text = FormatDuration(Duration(value));
    CHECK(ParseDuration(text) == Duration(value));
  }
  CHECK(FormatDuration(Duration(2 * d)) == "48h");
  CHECK(ParseDuration("2d") == Duration(2 * d));
}
