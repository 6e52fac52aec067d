#include "plan/name_rules.h"

#include <catch2/catch.hpp>
#include <string>

using namespace deployd;

TEST_CASE("identifiers follow the shell's rule", "[name_rules]") {
  CHECK(IsIdentifier("HF_TOKEN"));
  CHECK(IsIdentifier("_x1"));
  CHECK_FALSE(IsIdentifier("1x"));
  CHECK_FALSE(IsIdentifier("a-b"));
  CHECK_FALSE(IsIdentifier(""));
}

TEST_CASE("step ids and plan names", "[name_rules]") {
  CHECK(IsStepId("stop-glm_5"));
  CHECK_FALSE(IsStepId("Stop"));
  CHECK_FALSE(IsStepId(""));
  CHECK(IsPlanName("Kimi-K2.5_nvfp4"));
  CHECK_FALSE(IsPlanName("kimi k2"));
}

TEST_CASE("versions start with a digit", "[name_rules]") {
  for (const char* v : {"0.15.0", "0.16.0rc2", "2.1.0.post1", "1.0.0-beta", "1+local"})
    CHECK(IsVersion(v));
  CHECK_FALSE(IsVersion("v1"));
  CHECK_FALSE(IsVersion("1 2"));
}

TEST_CASE("unit names and digests", "[name_rules]") {
  CHECK(IsUnitName("kimi.service"));
  CHECK(IsUnitName("vllm@0:x\\y"));
  CHECK_FALSE(IsUnitName(".hidden"));
  CHECK_FALSE(IsUnitName("-x"));
  CHECK_FALSE(IsUnitName("a b"));
  CHECK_FALSE(IsUnitName(std::string(256, 'a')));
  CHECK(IsSha256Hex(std::string(64, 'A')));
  CHECK(IsSha256Hex(std::string(64, 'f')));
  CHECK_FALSE(IsSha256Hex(std::string(63, 'a')));
  CHECK_FALSE(IsSha256Hex(std::string(64, 'g')));
}
