#include <catch2/catch.hpp>

#include "deployd/plan.h"

using namespace deployd;

TEST_CASE("check kind names round-trip", "[plan_kinds]") {
  const CheckKind kinds[] = {
      CheckKind::kRun,     CheckKind::kHttp,     CheckKind::kTcp,      CheckKind::kFile,
      CheckKind::kCommand, CheckKind::kDiskFree, CheckKind::kPortFree, CheckKind::kWeightsComplete,
      CheckKind::kService, CheckKind::kProcess,  CheckKind::kGpusFree};
  for (CheckKind kind : kinds) {
    CHECK(ToString(kind) != "unknown");
    CHECK(ParseCheckKind(ToString(kind)) == kind);
  }
  CHECK(ToString(CheckKind::kWeightsComplete) == "weights_complete");
  CHECK(ToString(CheckKind::kDiskFree) == "disk_free");
  // `version` is written like a kind but reads as a run check: it is not a CheckKind.
  CHECK_FALSE(ParseCheckKind("version").has_value());
  CHECK_FALSE(ParseCheckKind("HTTP").has_value());
  CHECK_FALSE(ParseCheckKind("").has_value());
}

TEST_CASE("action kind names round-trip", "[plan_kinds]") {
  const ActionKind kinds[] = {ActionKind::kRun,     ActionKind::kApproval, ActionKind::kService,
                              ActionKind::kKill,    ActionKind::kGpusFree, ActionKind::kRemove,
                              ActionKind::kDownload};
  for (ActionKind kind : kinds) {
    CHECK(ToString(kind) != "unknown");
    CHECK(ParseActionKind(ToString(kind)) == kind);
  }
  CHECK(ToString(ActionKind::kGpusFree) == "gpus_free");
  CHECK_FALSE(ParseActionKind("approve").has_value());
  CHECK_FALSE(ParseActionKind("").has_value());
}
