#include "plan/field_reader.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <catch2/catch.hpp>
#include <string>
#include <string_view>

using namespace deployd;

namespace {

std::string Messages(FieldReader& in) {
  std::string out;
  for (const Diagnostic& d : in.TakeDiagnostics()) out += d.Format() + "\n";
  return out;
}

constexpr std::array<std::string_view, 3> kKnown = {"timeout", "retries", "env"};

}  // namespace

TEST_CASE("a map's unknown and duplicate keys are reported with their line", "[field_reader]") {
  std::string text = "timeout: 5s\ntimout: 6s\ntimeout: 7s\n";
  FieldReader in(text, "f.yaml");
  Fields f = in.ReadMap(YAML::Load(text), kKnown, "in step 'a'");
  REQUIRE(f.entries.size() == 1);
  CHECK(f.Get("timeout")->value.Scalar() == "5s");
  CHECK(f.Get("retries") == nullptr);
  CHECK(Messages(in) ==
        "f.yaml:2:1: error: unknown key 'timout' in step 'a' (did you mean 'timeout'?)\n"
        "timout: 6s\n"
        "^\n"
        "f.yaml:3:1: error: duplicate key 'timeout'\n"
        "timeout: 7s\n"
        "^\n");
}

TEST_CASE("variables are substituted; an undefined one is reported", "[field_reader]") {
  std::string text = "a: ${port}/$${x}\nb: ${prot}\n";
  FieldReader in(text, "f.yaml");
  in.DefineVariable("port", "8000");
  YAML::Node root = YAML::Load(text);
  std::vector<Field> fields = in.Entries(root);
  REQUIRE(fields.size() == 2);
  CHECK(in.String(fields[0]) == "8000/${x}");
  CHECK_FALSE(in.String(fields[1]).has_value());
  CHECK(Messages(in) ==
        "f.yaml:2:4: error: undefined variable 'prot' (did you mean 'port'?)\n"
        "b: ${prot}\n"
        "   ^\n");
}

TEST_CASE("typed scalars read the text after substitution", "[field_reader]") {
  std::string text = "n: '${n}'\nd: 90s\ns: 2GiB\nb: 'yes'\n";
  FieldReader in(text, "f.yaml");
  in.DefineVariable("n", "42");
  std::vector<Field> f = in.Entries(YAML::Load(text));
  CHECK(in.Integer(f[0], 0, 100) == 42);
  CHECK(in.DurationValue(f[1]) == Duration(90'000));
  CHECK(in.SizeValue(f[2]) == (2ull << 30));
  CHECK_FALSE(in.Bool(f[3]).has_value());
  CHECK(Messages(in) == "f.yaml:4:4: error: 'b' must be true or false\nb: 'yes'\n   ^\n");
}

TEST_CASE("diagnostics come out in source order, positionless ones first", "[field_reader]") {
  FieldReader in("x\ny\n", "f.yaml");
  in.Error({2, 1}, "second");
  in.Error({1, 1}, "first");
  in.Error({}, "no position");
  std::vector<Diagnostic> d = in.TakeDiagnostics();
  REQUIRE(d.size() == 3);
  CHECK(d[0].message == "no position");
  CHECK(d[1].message == "first");
  CHECK(d[1].source_line == "x");
  CHECK(d[2].message == "second");
}
