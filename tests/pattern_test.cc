// Patterns (util/pattern.h): what RE2 cannot take or what is over the bounds is refused with a
// reason an operator can act on; a set names the first pattern that matches, and where.
#include "util/pattern.h"

#include <catch2/catch.hpp>
#include <string>

using namespace deployd;

TEST_CASE("PatternProblem: RE2 syntax, with (?i), \\d, \\b, classes and named groups") {
  for (const char* ok : {"CUDA out of memory", "(?i)error.*cuda", R"(libcudart\.so\.\d+: cannot)",
                         R"(\b40[13] Client Error)", "(?P<unit>[a-z]+)\\.service", "[]a]", "\\/",
                         "VLLM::|vllm serve", "(?i)GatedRepoError"}) {
    INFO(ok);
    CHECK(PatternProblem(ok).empty());
  }
}

TEST_CASE("PatternProblem: back-references and lookaround are refused, saying why") {
  CHECK(PatternProblem(R"((a)\1)") ==
        R"(back-references (\1) are not supported (patterns are RE2 syntax))");
  CHECK(PatternProblem("error(?=: cuda)") ==
        "lookahead ((?=) is not supported (patterns are RE2 syntax)");
  CHECK(PatternProblem("error(?!: cuda)") ==
        "lookahead ((?!) is not supported (patterns are RE2 syntax)");
  CHECK(PatternProblem("(?<!no )error") ==
        "lookbehind ((?<= or (?<!) is not supported (patterns are RE2 syntax)");
  CHECK(PatternProblem("(?<unit>x)") ==
        "a named group is written (?P<name>...) (patterns are RE2 syntax)");
  CHECK(PatternProblem("(unclosed") == "missing ): (unclosed");
  CHECK(PatternProblem("a**") == "bad repetition operator: **");
}

TEST_CASE("PatternProblem: the bounds on length, nesting and compiled size") {
  CHECK(PatternProblem(std::string(4097, 'a')) == "longer than 4096 bytes");
  CHECK(PatternProblem(std::string(4096, 'a')).empty());
  CHECK(PatternProblem(std::string(33, '(') + "a" + std::string(33, ')')) ==
        "groups nested deeper than 32");
  CHECK(PatternProblem(std::string(32, '(') + "a" + std::string(32, ')')).empty());
  // Escaped, quoted and bracketed parentheses open no group.
  std::string escaped;
  for (int i = 0; i < 40; ++i) escaped += "\\(";
  CHECK(PatternProblem(escaped).empty());
  CHECK(PatternProblem("\\Q" + std::string(40, '(') + "\\E").empty());
  CHECK(PatternProblem("[" + std::string(40, '(') + "]").empty());
  // Nine bytes: a thousand copies of every letter of Unicode.
  CHECK(PatternProblem("\\pL{1000}") == "too large once compiled (over 8MiB)");
  CHECK(PatternProblem("a{1001}") == "invalid repetition size: {1001}");
  CHECK(PatternProblem("\xff") == "not valid UTF-8");
}

TEST_CASE("PatternSet: one scan, the first pattern in the order given, and where it matched") {
  std::vector<std::string> patterns = {"zzz", "(?i)error.*cuda", "error"};
  Result<PatternSet> set = PatternSet::Compile(patterns);
  REQUIRE(set.ok());
  CHECK_FALSE(set->FirstMatch("all is well"));
  std::optional<PatternMatch> m = set->FirstMatch("12 ERROR: no cuda device; error");
  REQUIRE(m);
  CHECK(m->index == 1);
  CHECK(m->offset == 3);
  CHECK(m->length == 14);  // "ERROR: no cuda"
  m = set->FirstMatch("error only");
  REQUIRE(m);
  CHECK(m->index == 2);
  CHECK(PatternSet().empty());
  CHECK_FALSE(PatternSet().Matches("x"));
}

TEST_CASE("PatternSet: a 64 KiB line is matched whole, invalid UTF-8 included") {
  Result<PatternSet> set = CompilePattern("(?i)error.*cuda");
  REQUIRE(set.ok());
  std::string line = "ERROR " + std::string(64 << 10, '\xff') + " cuda";
  std::optional<PatternMatch> m = set->FirstMatch(line);
  REQUIRE(m);
  CHECK(m->offset == 0);
  CHECK(m->length == line.size());
}

TEST_CASE("PatternSet::Compile refuses patterns that are too large together") {
  std::vector<std::string> patterns(5, "\\pL{100}");  // each ~120,000 instructions
  REQUIRE(PatternProblem(patterns[0]).empty());
  Result<PatternSet> set = PatternSet::Compile(patterns);
  REQUIRE_FALSE(set.ok());
  CHECK(set.status().message() == "the patterns together are too large once compiled (over 8MiB)");
  patterns.resize(4);
  CHECK(PatternSet::Compile(patterns).ok());
}

TEST_CASE("PatternSet::Compile refuses a pattern it is given that does not compile") {
  std::vector<std::string> patterns = {"ok", "(?=x)"};
  Result<PatternSet> set = PatternSet::Compile(patterns);
  REQUIRE_FALSE(set.ok());
  CHECK(set.status().message() ==
        "invalid pattern '(?=x)': lookahead ((?=) is not supported (patterns are RE2 syntax)");
}
