// What deployd knows while the store refuses writes (engine/storage_fault.h): the backoff of
// its tries and the line status, why and STATUS= show.
#include "engine/storage_fault.h"

#include <catch2/catch.hpp>

using namespace deployd;
using std::chrono::milliseconds;

TEST_CASE("storage fault: the tries back off by doubling, up to the most") {
  CHECK(StorageFault::Backoff(1) == milliseconds(200));
  CHECK(StorageFault::Backoff(2) == milliseconds(400));
  CHECK(StorageFault::Backoff(3) == milliseconds(800));
  CHECK(StorageFault::Backoff(5) == milliseconds(3200));
  CHECK(StorageFault::Backoff(6) == milliseconds(5000));
  CHECK(StorageFault::Backoff(1000) == milliseconds(5000));
}

TEST_CASE("storage fault: begins at the first failure, goes on, and clears") {
  StorageFault fault;
  CHECK_FALSE(fault.active());
  CHECK(fault.Failed("database or disk is full", 10'000) == milliseconds(200));
  CHECK(fault.active());
  CHECK(fault.since_ms() == 10'000);
  CHECK(fault.next_try_at_ms() == 10'200);
  CHECK(fault.Failed("disk I/O error", 10'200) == milliseconds(400));
  CHECK(fault.since_ms() == 10'000);  // the fault began at the first failure
  CHECK(fault.error() == "disk I/O error");
  CHECK(fault.failures() == 2);
  CHECK(fault.next_try_at_ms() == 10'600);
  CHECK(fault.Cleared(22'600) == 12'600);
  CHECK_FALSE(fault.active());
  CHECK(fault.failures() == 0);
  // A new fault starts its backoff afresh.
  CHECK(fault.Failed("database or disk is full", 30'000) == milliseconds(200));
  CHECK(fault.since_ms() == 30'000);
}

TEST_CASE("storage fault: says what cannot be recorded, for how long, and what waits") {
  StorageFault fault;
  fault.Failed("/s/deployd.db: cannot commit step.state to run a-1: database or disk is full",
               1'000);
  CHECK(fault.Describe(1'100, 1) ==
        "cannot record: /s/deployd.db: cannot commit step.state to run a-1: database or disk is "
        "full (for 100ms, 1 try; next try in 100ms; 1 transition waits)");
  for (int i = 0; i < 6; ++i) fault.Failed("database or disk is full", 1'000 + i * 1'000);
  CHECK(fault.Describe(13'400, 3) ==
        "cannot record: database or disk is full (for 12s, 7 tries; next try in 0s; 3 "
        "transitions wait)");
  CHECK(fault.Describe(7'000, 0) ==
        "cannot record: database or disk is full (for 6s, 7 tries; next try in 4s)");
}
