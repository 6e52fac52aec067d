#include "plan/watch_grammar.h"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/fail_on_sets.h"
#include "plan/plan_limits.h"
#include "util/pattern.h"
#include "util/units.h"

namespace deployd {
namespace {

constexpr std::array<std::string_view, 3> kWatchKeys = {"fail_on", "progress", "on_stall"};
constexpr std::array<std::string_view, 4> kProgressKeys = {"path", "stall_after", "every", "total"};
// Sampling faster than this costs CPU and tells nothing a person or a stall check could use.
constexpr Duration kMinProgressEvery{100};

// `every`, which must be at least kMinProgressEvery and, when `stall_after` was read
// (`stall_after_ok`), shorter than it; without `every`, the default must be shorter.
bool ReadProgressEvery(FieldReader& in, const Fields& f, bool stall_after_ok, ProgressSpec& spec) {
  const Field* stall_after = f.Get("stall_after");
  if (const Field* every = f.Get("every")) {
    std::optional<Duration> parsed = in.DurationValue(*every);
    bool good = parsed.has_value();
    Duration d = parsed.value_or(Duration{0});
    if (good && d < kMinProgressEvery) {
      in.Error(ValuePos(*every), "'every' must be at least " + FormatDuration(kMinProgressEvery));
      good = false;
    } else if (good && stall_after_ok && d >= spec.stall_after) {
      in.Error(ValuePos(*every), "'every' (" + FormatDuration(d) +
                                     ") must be shorter than 'stall_after' (" +
                                     FormatDuration(spec.stall_after) + ")");
      good = false;
    }
    spec.every = d;
    return good;
  }
  if (stall_after_ok && spec.every >= spec.stall_after) {
    in.Error(ValuePos(*stall_after), "'stall_after' (" + FormatDuration(spec.stall_after) +
                                         ") must be longer than 'every' (" +
                                         FormatDuration(spec.every) + " by default)");
    return false;
  }
  return true;
}

// {path, stall_after, every, total}; without `path` only progress lines in the output count.
std::optional<ProgressSpec> ReadProgress(FieldReader& in, const Field& e) {
  if (!e.value.IsMap()) {
    in.Error(ValuePos(e), "'progress' must be a map with 'stall_after' (and 'path' to watch)");
    return std::nullopt;
  }
  ProgressSpec spec;
  spec.pos = PosOf(e.value);
  Fields f = in.ReadMap(e.value, kProgressKeys, "in 'progress'");
  bool ok = true;
  if (const Field* path = f.Get("path")) {
    std::optional<std::string> s = in.NonEmptyString(*path);
    ok = ok && s;
    spec.path = s.value_or("");
  }
  if (const Field* stall_after = f.Get("stall_after")) {
    std::optional<Duration> d = in.DurationValue(*stall_after);
    ok = ok && d;
    if (d) spec.stall_after = *d;
  } else {
    in.Error(PosOf(e.value), "missing required key 'stall_after' in 'progress'");
    ok = false;
  }
  bool stall_after_ok = f.Get("stall_after") && ok;
  ok = ReadProgressEvery(in, f, stall_after_ok, spec) && ok;
  if (const Field* total = f.Get("total")) {
    std::optional<std::uint64_t> size = in.SizeValue(*total);
    if (size && !f.Get("path")) {
      in.Error(PosOf(total->key), "'total' needs 'path' (the bytes it is compared with)");
      size.reset();
    }
    ok = ok && size;
    spec.total = size;
  }
  if (!ok) return std::nullopt;
  return spec;
}

void ReadFailOn(FieldReader& in, const Field* fail_on, Watch& watch) {
  if (!fail_on) return;
  // A step's patterns are matched as one set, which must fit as each pattern does.
  std::int64_t instructions = 0;
  // A bare set name ("vllm") stands for its patterns: as a regex it would match any line that
  // mentions the program.
  auto add = [&](const YAML::Node& node, SourcePos pos) {
    if (!FailOnSet(node.Scalar()).empty()) {
      AddFailOnSet(node.Scalar(), pos, watch);
      instructions += FailOnSetInstructions(node.Scalar());
    } else if (std::optional<std::string> re = in.Regex(node, pos, "fail_on", &instructions)) {
      watch.fail_on.push_back(FailPattern{*re, pos, "", false, ""});
    }
  };
  if (fail_on->value.IsScalar()) {
    add(fail_on->value, ValuePos(*fail_on));
  } else if (fail_on->value.IsSequence()) {
    for (auto it = fail_on->value.begin(); it != fail_on->value.end(); ++it) {
      YAML::Node pattern = *it;
      if (pattern.IsScalar()) {
        add(pattern, PosOf(pattern));
      } else {
        in.Error(PosOf(pattern), "'fail_on' must be a string or a list of strings");
      }
    }
  } else {
    in.Error(ValuePos(*fail_on), "'fail_on' must be a string or a list of strings");
  }
  if (watch.fail_on.size() > kMaxFailOnPatterns) {
    in.Error(PosOf(fail_on->key), "'fail_on' has " + std::to_string(watch.fail_on.size()) +
                                      " patterns: a step has at most " +
                                      std::to_string(kMaxFailOnPatterns) +
                                      " (a set counts its own)");
  } else if (std::string problem = SetProblem(instructions); !problem.empty()) {
    in.Error(PosOf(fail_on->key), "'fail_on': " + problem);
  }
}

}  // namespace

Watch ReadWatch(FieldReader& in, const Field& e, bool has_retries) {
  Watch watch;
  if (e.value.IsNull()) return watch;
  if (!e.value.IsMap()) {
    in.Error(ValuePos(e), "'watch' must be a map");
    return watch;
  }
  Fields f = in.ReadMap(e.value, kWatchKeys, "in 'watch'");
  if (const Field* progress = f.Get("progress")) watch.progress = ReadProgress(in, *progress);
  if (const Field* on_stall = f.Get("on_stall")) {
    std::optional<std::string> value = in.String(*on_stall);
    if (value == "restart") {
      watch.on_stall = OnStall::kRestart;
    } else if (value && *value != "fail") {
      in.Error(ValuePos(*on_stall), "'on_stall' must be fail or restart");
    }
    if (!f.Get("progress")) {
      in.Error(PosOf(on_stall->key), "'on_stall' needs 'progress' (what would stall?)");
    } else if (watch.on_stall == OnStall::kRestart && !has_retries) {
      in.Error(ValuePos(*on_stall),
               "'on_stall: restart' needs 'retries' (how many times the action may be fired "
               "again)");
    }
  }
  ReadFailOn(in, f.Get("fail_on"), watch);
  return watch;
}

}  // namespace deployd
