// The limits of plan_limits.h and what a plan must not hold (plan_document.h), each with its
// message pinned, and a plan just within each limit accepted.
#include "plan/plan_limits.h"

#include <catch2/catch.hpp>
#include <string>
#include <string_view>

#include "plan/plan_parser.h"

using namespace deployd;

namespace {

std::string Errors(std::string_view text) {
  ParseResult result = ParsePlan(text, "plan.yaml", {});
  std::string out;
  for (const Diagnostic& d : result.errors) out += d.Format() + "\n";
  if (result.plan.has_value() != result.errors.empty()) out += "BUG: plan and errors disagree\n";
  return out;
}

constexpr std::string_view kHead = "version: 1\nname: t\nsteps: [{id: a, run: b}]\n";

std::string Repeat(std::string_view s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

}  // namespace

// yaml-cpp's LoadAll returned empty documents forever on a stray ',': 3.8 GB, then bad_alloc.
TEST_CASE("plan limits: a stray ',' is refused at once, not read forever") {
  CHECK(Errors(",") == "plan.yaml:1:1: error: invalid YAML: unexpected ','\n,\n^\n");
  CHECK(Errors("- a\n,\n") == "plan.yaml:2:1: error: invalid YAML: unexpected ','\n,\n^\n");
  CHECK(Errors(std::string(kHead) + "---\nname: u\n") ==
        "plan.yaml:4:1: error: the plan must be a single YAML document\n---\n^\n");
}

TEST_CASE("plan limits: the document's size") {
  CHECK(Errors(std::string(kMaxPlanBytes + 1, '#')) ==
        "plan.yaml: error: the plan is larger than 1MiB (1048577 bytes)\n");
  std::string fits = std::string(kHead) + "#" + std::string(kMaxPlanBytes - kHead.size() - 2, 'x');
  CHECK(Errors(fits + "\n").empty());
}

TEST_CASE("plan limits: bytes a plan must not hold, with where they are") {
  CHECK(Errors("version: 1\nname: t\xff\n") ==
        "plan.yaml:2:8: error: invalid UTF-8 (byte 0xFF)\nname: t\xEF\xBF\xBD\n       ^\n");
  CHECK(Errors(std::string("version: 1\nname: a\0b\n", 20)) ==
        "plan.yaml:2:8: error: control character U+0000 is not allowed in a plan\n"
        "name: a\xEF\xBF\xBD"
        "b\n       ^\n");
  // An escape in a double-quoted string spells one too.
  CHECK(Errors("version: 1\nname: \"a\\0b\"\nsteps: [{id: a, run: b}]\n") ==
        "plan.yaml:2:7: error: control character U+0000 is not allowed in a plan\n"
        "name: \"a\\0b\"\n      ^\n");
  CHECK(Errors("version: 1\nname: t\nsteps: [{id: a, run: \"printf \\x07\"}]\n") ==
        "plan.yaml:3:22: error: control character U+0007 is not allowed in a plan\n"
        "steps: [{id: a, run: \"printf \\x07\"}]\n                     ^\n");
  CHECK(Errors("version: 1\nname: t\r\nsteps: [{id: a, run: \"\tb\"}]\n").empty());
}

TEST_CASE("plan limits: YAML tags are refused, not ignored") {
  CHECK(Errors("version: 1\nname: !custom t\nsteps: [{id: a, run: b}]\n") ==
        "plan.yaml:2:7: error: YAML tags are not supported ('!custom')\n"
        "name: !custom t\n      ^\n");
  CHECK(Errors("version: 1\nname: t\nsteps: [{id: a, run: !!binary aGk=}]\n") ==
        "plan.yaml:3:22: error: YAML tags are not supported ('!!binary')\n"
        "steps: [{id: a, run: !!binary aGk=}]\n                     ^\n");
  CHECK(Errors("version: 1\nname: t\nsteps: !!seq [{id: a, run: b}]\n") ==
        "plan.yaml:3:8: error: YAML tags are not supported ('!!seq')\n"
        "steps: !!seq [{id: a, run: b}]\n       ^\n");
}

// yaml-cpp ends a quoted string at the end of the text without a word.
TEST_CASE("plan limits: a quote left open at the end of the file") {
  CHECK(Errors("version: 1\nname: t\nsteps:\n  - id: a\n    run: \"echo hi\n") ==
        "plan.yaml:5:10: error: unterminated quoted string (its closing quote is missing)\n"
        "    run: \"echo hi\n         ^\n");
  CHECK(Errors("version: 1\nname: t\nsteps:\n  - id: a\n    run: 'it''s\n") ==
        "plan.yaml:5:10: error: unterminated quoted string (its closing quote is missing)\n"
        "    run: 'it''s\n         ^\n");
  CHECK(Errors("version: 1\nname: t\nsteps:\n  - id: a\n    run: 'it''s'\n").empty());
  CHECK(Errors("version: 1\nname: t\nsteps:\n  - id: a\n    run: \"say \\\"hi\\\"\"\n").empty());
}

TEST_CASE("plan limits: nesting, nodes, string length and aliases") {
  std::string nested = "version: 1\nname: t\nx: " + std::string(70, '[') + std::string(70, ']');
  CHECK(Errors(nested + "\n")
            .starts_with(
                "plan.yaml:3:67: error: the plan nests deeper than 64 levels of maps and lists\n"));
  // 64 levels: the top map and 63 lists; the plan is then wrong only in its unknown key.
  std::string deep = std::string(kHead) + "x: " + std::string(63, '[') + std::string(63, ']');
  CHECK(Errors(deep + "\n").starts_with("plan.yaml:4:1: error: unknown top-level key 'x'\n"));

  // The head is 12 nodes, `vars:` and its map 2 more, each variable 2: 50,000 in all.
  std::string vars = std::string(kHead) + "vars:\n";
  for (int i = 0; i < 24'993; ++i) vars += "  v" + std::to_string(i) + ": 1\n";
  CHECK(Errors(vars).empty());
  vars += "  last: 1\n";
  CHECK(Errors(vars) ==
        "plan.yaml:24998:3: error: the plan has more than 50000 keys, values and items (an alias "
        "counts those it repeats)\n  last: 1\n  ^\n");

  // A billion laughs: each alias counts what it repeats.
  std::string laughs = std::string(kHead) + "vars:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 8; ++i) {
    std::string previous = "*a" + std::to_string(i - 1) + ", ";
    laughs += "  a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + Repeat(previous, 9) +
              previous.substr(0, previous.size() - 2) + "]\n";
  }
  CHECK(Errors(laughs).starts_with(
      "plan.yaml:9:27: error: the plan has more than 50000 keys, values and items (an alias "
      "counts those it repeats)\n"));
  CHECK(Errors("version: 1\nname: t\nx: &x [1, *x]\n") ==
        "plan.yaml:3:11: error: an alias cannot name a node that contains it\n"
        "x: &x [1, *x]\n          ^\n");

  std::string description = std::string(kHead) + "description: ";
  CHECK(Errors(description + std::string(kMaxStringBytes, 'd') + "\n").empty());
  CHECK(Errors(description + std::string(kMaxStringBytes + 1, 'd') + "\n") ==
        "plan.yaml:4:14: error: a string longer than 64KiB\n"
        "description: " +
            std::string(kMaxQuotedSourceBytes - 16, 'd') + "\xE2\x80\xA6\n             ^\n");
}

TEST_CASE("plan limits: values accepted before and wrong: version as a string, an empty cwd") {
  CHECK(Errors("version: \"1\"\nname: t\nsteps: [{id: a, run: b}]\n") ==
        "plan.yaml:1:10: error: 'version' must be the integer 1, not a string\n"
        "version: \"1\"\n         ^\n");
  CHECK(Errors("version: 1\nname: t\nsteps: [{id: a, run: b, cwd: ''}]\n") ==
        "plan.yaml:3:30: error: 'cwd' must not be empty\n"
        "steps: [{id: a, run: b, cwd: ''}]\n                             ^\n");
}

// `timeout: 110000d` passed and overflowed the timer: the step was killed at once.
TEST_CASE("plan limits: a duration is at most a year") {
  CHECK(Errors("version: 1\nname: t\nsteps: [{id: a, run: b, timeout: 365d}]\n").empty());
  CHECK(Errors("version: 1\nname: t\nsteps: [{id: a, run: b, timeout: 110000d}]\n") ==
        "plan.yaml:3:34: error: 'timeout' must be at most 365d, not '110000d'\n"
        "steps: [{id: a, run: b, timeout: 110000d}]\n                                 ^\n");
  CHECK(Errors("version: 1\nname: t\nsteps: [{id: a, run: b, retry_delay: 365d1ms}]\n") ==
        "plan.yaml:3:38: error: 'retry_delay' must be at most 365d, not '365d1ms'\n"
        "steps: [{id: a, run: b, retry_delay: 365d1ms}]\n                                     ^\n");
}

TEST_CASE("plan limits: a number has at most 64 characters") {
  std::string plan = "version: 1\nname: t\nsteps: [{id: a, run: b, retries: ";
  CHECK(Errors(plan + std::string(63, '0') + "1}]\n").empty());
  CHECK(Errors(plan + std::string(64, '0') + "1}]\n") ==
        "plan.yaml:3:34: error: 'retries' is too long for a number (more than 64 characters)\n" +
            plan.substr(plan.rfind('\n') + 1) + std::string(64, '0') + "1}]\n" +
            std::string(33, ' ') + "^\n");
  std::string http = std::string(kHead.substr(0, kHead.rfind("steps"))) +
                     "preflight:\n  - http: {url: 'http://h/', method: POST, body: {n: ";
  CHECK(Errors(http + std::string(64, '1') + "}}\nsteps: [{id: a, run: b}]\n").empty());
  CHECK(Errors(http + std::string(65, '1') + "}}\nsteps: [{id: a, run: b}]\n") ==
        "plan.yaml:4:54: error: a number in 'body' longer than 64 characters (quote it to send "
        "a string)\n  - http: {url: 'http://h/', method: POST, body: {n: " +
            std::string(65, '1') + "}}\n" + std::string(53, ' ') + "^\n");
}

TEST_CASE("plan limits: at most 1000 steps, steps and on_failure together") {
  std::string plan = "version: 1\nname: t\nsteps:\n";
  for (int i = 0; i < 999; ++i) plan += "  - {id: s" + std::to_string(i) + ", run: b}\n";
  plan += "on_failure:\n  - {id: f, run: b}\n";
  CHECK(Errors(plan).empty());
  plan += "  - {id: g, run: b}\n";
  CHECK(Errors(plan) ==
        "plan.yaml:1004:3: error: too many steps (1001): a plan has at most 1000, 'steps' and "
        "'on_failure' together\n  - {id: f, run: b}\n  ^\n");
}

// A 44 KB one-line plan gave a 265 MB answer: every diagnostic quoted the whole line, and there
// was no end to them.
TEST_CASE("plan limits: at most 100 diagnostics, then how many more; long lines quoted cut") {
  std::string plan(kHead);
  for (int i = 0; i < 150; ++i) plan += "bad_" + std::to_string(1000 + i) + ": 1\n";
  ParseResult result = ParsePlan(plan, "plan.yaml", {});
  REQUIRE(result.errors.size() == kMaxDiagnostics + 1);
  CHECK(result.errors[0].Format() ==
        "plan.yaml:4:1: error: unknown top-level key 'bad_1000'\nbad_1000: 1\n^");
  CHECK(result.errors[99].message == "unknown top-level key 'bad_1099'");
  CHECK(result.errors[100].Format() ==
        "plan.yaml: error: and 50 more errors (the first 100 are shown)");

  std::string line = "{version: 1, name: t, steps: [{id: a, run: b}], ";
  for (int i = 0; i < 2000; ++i) line += "k" + std::to_string(i) + ": 1, ";
  line += "stpes: 1}";
  result = ParsePlan(line, "plan.yaml", {});
  REQUIRE(result.errors.size() == kMaxDiagnostics + 1);
  // Around the column, on one screen line: a quarter of the budget before it.
  CHECK(result.errors[50].Format() ==
        "plan.yaml:1:439: error: unknown top-level key 'k50'\n"
        "\xE2\x80\xA6k45: 1, k46: 1, k47: 1, k48: 1, k49: 1, k50: 1, k51: 1, k52: 1, k53: 1, "
        "k54: 1, k55: 1, k56: 1, k57: 1, k58: 1, k59: 1, k60: 1, k61: 1, k62: 1, k63: 1, "
        "k6\xE2\x80\xA6\n" +
            std::string(41, ' ') + "^");
}

TEST_CASE("plan limits: suggestions only for short names, against names of a close length") {
  std::string vars = "version: 1\nname: t\nvars:\n";
  for (int i = 0; i < 2000; ++i) vars += "  var_" + std::to_string(i) + ": x\n";
  std::string name32(31, 'n'), name33(32, 'n');
  vars += "  " + name32 + "x: x\n  " + name33 + "x: x\n";
  CHECK(Errors(vars + "steps: [{id: a, run: '${" + name32 + "y}'}]\n")
            .find("undefined variable '" + name32 + "y' (did you mean '" + name32 + "x'?)") !=
        std::string::npos);
  CHECK(Errors(vars + "steps: [{id: a, run: '${" + name33 + "y}'}]\n")
            .find("undefined variable '" + name33 + "y'\n") != std::string::npos);
  CHECK(Errors(vars + "steps: [{id: a, run: '${var_17y}'}]\n")
            .find("undefined variable 'var_17y' (did you mean 'var_17'?)") != std::string::npos);
}

// Compiled when the step first prints, on the daemon's thread: their number is bounded.
TEST_CASE("plan limits: a step's fail_on has at most 100 patterns, a set's counted") {
  std::string plan = "version: 1\nname: t\nsteps:\n  - id: a\n    run: b\n    watch:\n";
  std::string patterns = "      fail_on: [vllm, hf";  // 16 + 3
  for (int i = 0; i < 81; ++i) patterns += ", p" + std::to_string(i);
  CHECK(Errors(plan + patterns + "]\n").empty());
  CHECK(Errors(plan + patterns + ", one_more]\n") ==
        "plan.yaml:7:7: error: 'fail_on' has 101 patterns: a step has at most 100 (a set counts "
        "its own)\n" +
            patterns.substr(0, kMaxQuotedSourceBytes - 3) + "\xE2\x80\xA6\n      ^\n");
}

// A request is JSON: a --var that is not UTF-8 passed validate, then apply failed as "not a
// JSON object".
TEST_CASE("plan limits: a --var value must be UTF-8, as the plan must") {
  std::string plan = "version: 1\nname: t\nvars:\n  who: x\nsteps: [{id: a, run: 'echo ${who}'}]\n";
  ParseResult result = ParsePlan(plan, "plan.yaml", {{"who", "caf\xe9"}});
  REQUIRE(result.errors.size() == 1);
  CHECK(result.errors[0].Format() == "plan.yaml: error: --var 'who': the value is not valid UTF-8");
  CHECK(ParsePlan(plan, "plan.yaml", {{"who", "café"}}).plan.has_value());
}
