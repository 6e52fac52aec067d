// deployctl's times as people read them: a wall-clock time and how long ago it was.
#include <catch2/catch.hpp>

#include "ctl/ctl_client.h"

using deployd::ctl::Ago;
using deployd::ctl::Clock;
using deployd::ctl::When;

TEST_CASE("Ago: seconds, minutes, hours, days; a time to come") {
  constexpr std::int64_t kNow = 1'700'000'000'000;
  CHECK(Ago(kNow, kNow) == "0s ago");
  CHECK(Ago(kNow - 12'300, kNow) == "12s ago");
  CHECK(Ago(kNow - 4 * 60'000 - 59'000, kNow) == "4m ago");
  CHECK(Ago(kNow - 3 * 3'600'000, kNow) == "3h ago");
  CHECK(Ago(kNow - 50 * 3'600'000, kNow) == "2d ago");
  CHECK(Ago(kNow + 5'000, kNow) == "in 5s");
  CHECK(When(kNow - 60'000, kNow) == Clock(kNow - 60'000) + " (1m ago)");
}
