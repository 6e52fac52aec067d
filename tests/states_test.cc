#include "deployd/states.h"

#include <catch2/catch.hpp>

using namespace deployd;

TEST_CASE("state names round-trip") {
  for (auto s : {RunState::kPending, RunState::kRunning, RunState::kPaused, RunState::kWaiting,
                 RunState::kSucceeded, RunState::kFailed, RunState::kCancelled})
    CHECK(ParseRunState(ToString(s)) == s);
  for (auto s :
       {StepState::kPending, StepState::kRunning, StepState::kVerifying, StepState::kSucceeded,
        StepState::kFailed, StepState::kSkipped, StepState::kCancelled, StepState::kWaiting})
    CHECK(ParseStepState(ToString(s)) == s);
  CHECK(ToString(StepState::kVerifying) == "verifying");
  CHECK_FALSE(ParseRunState("done").has_value());
}
