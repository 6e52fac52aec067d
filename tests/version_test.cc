#include "checks/version.h"

#include <catch2/catch.hpp>
#include <string>

using namespace deployd;

namespace {

struct Ordered {
  const char* lower;
  const char* higher;
};

}  // namespace

TEST_CASE("versions order as PEP 440 says") {
  // Each pair is strictly ordered; both directions are checked.
  const Ordered table[] = {
      {"1.9", "1.10"},
      {"0.14.1", "0.15.0"},
      {"0.15.0", "0.15.1"},
      {"0.16.0rc2.dev313", "0.16.0rc2"},
      {"0.16.0rc2", "0.16.0"},
      {"0.16.0", "0.16.0.post1"},
      {"0.16.0.post1", "0.16.0.post2"},
      {"0.16.0.post1.dev2", "0.16.0.post1"},
      {"0.16.0", "0.16.0.post1.dev2"},
      {"1.0.dev1", "1.0a1"},
      {"1.0a1", "1.0a2"},
      {"1.0a2", "1.0b1"},
      {"1.0b1", "1.0rc1"},
      {"1.0rc1", "1.0"},
      {"1.0a1.dev1", "1.0a1"},
      {"1.0", "1!0.1"},
      {"2.9.9", "10.0"},
      {"1.0", "1.0-1"},
      {"0.15.0rc1", "0.15"},
      {"v1.2", "1.3"},
  };
  for (const Ordered& pair : table) {
    INFO(pair.lower << " < " << pair.higher);
    CHECK(CompareVersions(pair.lower, pair.higher) < 0);
    CHECK(CompareVersions(pair.higher, pair.lower) > 0);
  }
}

TEST_CASE("equal versions compare equal") {
  const Ordered table[] = {
      {"0.15", "0.15.0"},
      {"0.15.0", "0.15.0.0"},
      {"0.16.0+cu128", "0.16.0"},
      {"0.16.0+cu128", "0.16.0+cu126"},
      {"1.0RC1", "1.0rc1"},
      {"1.0c1", "1.0rc1"},
      {"1.0-alpha.1", "1.0a1"},
      {"1.0.post", "1.0.post0"},
      {"1.0-r2", "1.0.post2"},
      {"v2.1", "2.1"},
      {"0", "0.0"},
  };
  for (const Ordered& pair : table) {
    INFO(pair.lower << " == " << pair.higher);
    CHECK(CompareVersions(pair.lower, pair.higher) == 0);
  }
}

TEST_CASE("text that is not PEP 440 is ordered by its release numbers") {
  CHECK(CompareVersions("12.4-ubuntu1~22.04", "12.4") == 0);
  CHECK(CompareVersions("", "0.1") < 0);
  CHECK(CompareVersions("99999999999999999999999.1", "1") > 0);  // saturates, no overflow
}

TEST_CASE("FindVersion takes the first version-like token") {
  CHECK(FindVersion("0.15.1\n") == "0.15.1");
  CHECK(FindVersion("vllm 0.16.0rc2.dev313+gabc123 (cuda 12.8)") == "0.16.0rc2.dev313+gabc123");
  CHECK(FindVersion("Python 3.11.2") == "3.11.2");
  CHECK(FindVersion("tool v1.2.3.") == "1.2.3");
  CHECK(FindVersion("Successfully installed vllm-0.15.0") == "0.15.0");
  CHECK(FindVersion("x86_64 build 42, release 2.0-beta") == "2.0-beta");
  CHECK(FindVersion("cu128 and 7") == std::nullopt);
  CHECK(FindVersion("") == std::nullopt);
  CHECK(FindVersion("1.") == std::nullopt);
}
