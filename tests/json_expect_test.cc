#include "checks/json_expect.h"

#include <catch2/catch.hpp>

using namespace deployd;

namespace {

JsonExpectation Eq(std::string path, std::string value) {
  return {std::move(path), JsonExpectation::Op::kEquals, std::move(value)};
}
JsonExpectation Has(std::string path, std::string value) {
  return {std::move(path), JsonExpectation::Op::kContains, std::move(value)};
}

}  // namespace

TEST_CASE("json expectations: paths, equals and contains", "[json_expect]") {
  const std::string body = R"({"data":[{"id":"a","n":3,"ok":true,"tags":["x","y"]},{"id":"bc"}],)"
                           R"("version":"0.16.0","none":null,"map":{"k":1}})";
  struct Row {
    JsonExpectation x;
    bool met;
  };
  const Row rows[] = {
      {Eq("version", "0.16.0"), true},  {Eq("data.0.id", "a"), true},
      {Eq("data.1.id", "a"), false},    {Eq("data.*.id", "bc"), true},
      {Eq("data.0.n", "3"), true},  // a number matches its text
      {Eq("data.0.ok", "true"), true},  {Eq("none", "null"), true},
      {Has("data.*.id", "c"), true},                              // substring of a string
      {Has("data.0.tags", "y"), true},                            // element of an array
      {Has("data.0.tags", "z"), false}, {Has("map", "k"), true},  // member of an object
      {Eq("map.*", "1"), true},         {Eq("data.2.id", "a"), false},
      {Eq("data.x.id", "a"), false},
  };
  for (const Row& row : rows) {
    INFO(DescribeExpectation(row.x));
    CHECK(FirstUnmetExpectation(body, {row.x}).has_value() == !row.met);
  }
  CHECK(FirstUnmetExpectation(body, {}) == std::nullopt);
  CHECK(FirstUnmetExpectation(body, {Eq("data.*.id", "z")}) ==
        std::optional<std::string>("json data.*.id: no value equals 'z' (saw \"a\", \"bc\")"));
  CHECK(FirstUnmetExpectation(body, {Eq("missing", "z")}) ==
        std::optional<std::string>("json missing: nothing at this path"));
  CHECK(DescribeExpectation(Has("data.*.id", "kimi")) == "data.*.id contains 'kimi'");
}
