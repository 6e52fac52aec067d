#include "ctl/did_you_mean.h"

#include <catch2/catch.hpp>

using deployd::ctl::DidYouMean;
using deployd::ctl::EditDistance;

namespace {

const std::vector<std::string> kVerbs = {"validate", "apply", "plan", "runs",  "status",
                                         "watch",    "logs",  "why",  "retry", "resume"};

}  // namespace

TEST_CASE("EditDistance counts insertions, deletions, replacements and swaps") {
  CHECK(EditDistance("status", "status") == 0);
  CHECK(EditDistance("stauts", "status") == 1);  // a swap
  CHECK(EditDistance("stats", "status") == 1);
  CHECK(EditDistance("statsu", "status") == 1);
  CHECK(EditDistance("", "runs") == 4);
  CHECK(EditDistance("apply", "") == 5);
  CHECK(EditDistance("kitten", "sitting") == 3);
}

TEST_CASE("DidYouMean names the closest verbs, or none") {
  CHECK(DidYouMean("stauts", kVerbs) == "'status'");
  CHECK(DidYouMean("aply", kVerbs) == "'apply'");
  CHECK(DidYouMean("stat", kVerbs) == "'status'");
  CHECK(DidYouMean("re", kVerbs) == "'retry' or 'resume'");
  CHECK(DidYouMean("lgos", kVerbs) == "'logs'");
  CHECK(DidYouMean("frobnicate", kVerbs) == "");
  CHECK(DidYouMean("x", kVerbs) == "");
}
