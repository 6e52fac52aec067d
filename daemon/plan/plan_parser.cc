// PlanParser: a recursive descent over the node tree that yaml-cpp builds. yaml-cpp only checks
// YAML syntax; every rule of plan format v1 is checked here, and every problem goes to one sink
// so that the user sees all of them in one go (like a compiler), not one per attempt.
//
// yaml-cpp 0.7 quirks this file works around (notes/build-facts.md §5): marks are 0-based,
// duplicate map keys are accepted silently, an empty value (`key:`) carries the mark of whatever
// follows it, and an alias can make a node contain itself.
#include "plan/plan_parser.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <exception>
#include <limits>
#include <regex>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plan/fail_on_sets.h"
#include "util/units.h"

namespace deployd {
namespace {

constexpr std::string_view kDurationHint = "(expected e.g. 500ms, 15s, 10m, 8h)";
constexpr std::string_view kSizeHint = "(expected e.g. 512MiB, 600GiB, 1GB)";
constexpr std::string_view kKindList =
    "run, http, tcp, file, command, disk_free, port_free, weights_complete, service, process, "
    "gpus_free, version";
constexpr std::string_view kActionList =
    "run, approval, service, kill, gpus_free, remove, download";

using Keys = std::span<const std::string_view>;

constexpr std::array<std::string_view, 8> kTopKeys = {
    "version", "name", "description", "vars", "secrets", "preflight", "steps", "on_failure"};
constexpr std::array<std::string_view, 7> kActionKeys = {"run",       "approval", "service", "kill",
                                                         "gpus_free", "remove",   "download"};
constexpr std::array<std::string_view, 20> kStepKeys = {
    "id",          "run",        "approval", "service", "kill",       "gpus_free", "remove",
    "download",    "background", "env",      "cwd",     "timeout",    "grace",     "retries",
    "retry_delay", "verify",     "skip_if",  "watch",   "idempotent", "secrets"};
// Keys about a command and its process, which an approval step does not have.
constexpr std::array<std::string_view, 8> kCommandOnlyStepKeys = {
    "background", "env", "cwd", "timeout", "grace", "watch", "idempotent", "secrets"};
// Keys only a `run` step has: built-in actions choose these themselves.
constexpr std::array<std::string_view, 3> kRunOnlyStepKeys = {"background", "cwd", "idempotent"};
constexpr std::array<std::string_view, 12> kCheckKinds = {
    "run",     "http",      "tcp",       "file",
    "command", "disk_free", "port_free", "weights_complete",
    "service", "process",   "gpus_free", "version"};
constexpr std::array<std::string_view, 4> kRunOnlyKeys = {"output_matches", "version_at_least",
                                                          "version_below", "env"};
constexpr std::array<std::string_view, 20> kCheckKeys = {"run",
                                                         "http",
                                                         "tcp",
                                                         "file",
                                                         "command",
                                                         "disk_free",
                                                         "port_free",
                                                         "weights_complete",
                                                         "service",
                                                         "process",
                                                         "gpus_free",
                                                         "version",
                                                         "after",
                                                         "every",
                                                         "within",
                                                         "timeout",
                                                         "output_matches",
                                                         "version_at_least",
                                                         "version_below",
                                                         "env"};
constexpr std::array<std::string_view, 6> kHttpKeys = {"url",    "method",        "body",
                                                       "status", "body_contains", "json"};
constexpr std::array<std::string_view, 3> kJsonKeys = {"path", "equals", "contains"};
constexpr std::array<std::string_view, 9> kServiceKeys = {
    "unit",        "state",       "enabled", "exec", "environment", "user", "working_directory",
    "description", "stop_timeout"};
constexpr std::array<std::string_view, 3> kServiceCheckKeys = {"unit", "state", "enabled"};
constexpr std::array<std::string_view, 3> kKillKeys = {"match", "grace", "whole_groups"};
constexpr std::array<std::string_view, 2> kProcessKeys = {"match", "absent"};
constexpr std::array<std::string_view, 7> kGpusFreeKeys = {
    "gpus", "max_used", "stable_for", "every", "within", "kill", "grace"};
constexpr std::array<std::string_view, 2> kGpusCheckKeys = {"gpus", "max_used"};
constexpr std::array<std::string_view, 1> kRemoveKeys = {"path"};
constexpr std::array<std::string_view, 6> kDownloadKeys = {"repo",    "to",      "revision",
                                                           "include", "exclude", "size"};
constexpr std::array<std::string_view, 4> kVersionKeys = {"run", "command", "at_least", "below"};
constexpr std::array<std::string_view, 2> kWeightsKeys = {"path", "sha256"};
constexpr std::array<std::string_view, 2> kSecretKeys = {"file", "env"};
// A download that makes no progress for this long is restarted (downloads resume).
constexpr Duration kDownloadStallAfter = std::chrono::minutes(10);
constexpr int kDownloadRetries = 3;
constexpr std::array<std::string_view, 2> kTcpKeys = {"host", "port"};
constexpr std::array<std::string_view, 3> kFileKeys = {"path", "absent", "min_size"};
constexpr std::array<std::string_view, 3> kDiskFreeKeys = {"path", "at_least", "count_present"};
constexpr std::array<std::string_view, 2> kPortFreeKeys = {"port", "host"};
constexpr std::array<std::string_view, 3> kWatchKeys = {"fail_on", "progress", "on_stall"};
constexpr std::array<std::string_view, 4> kProgressKeys = {"path", "stall_after", "every", "total"};
// Sampling faster than this costs CPU and tells nothing a person or a stall check could use.
constexpr Duration kMinProgressEvery{100};

std::string Quoted(std::string_view s) { return "'" + std::string(s) + "'"; }

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsAlpha(char c) { return IsLower(c) || (c >= 'A' && c <= 'Z'); }

bool AllOf(std::string_view s, bool (*ok)(char)) {
  return !s.empty() && std::all_of(s.begin(), s.end(), ok);
}
bool IsPlanName(std::string_view s) {
  return AllOf(s,
               [](char c) { return IsAlpha(c) || IsDigit(c) || c == '.' || c == '_' || c == '-'; });
}
bool IsStepId(std::string_view s) {
  return AllOf(s, [](char c) { return IsLower(c) || IsDigit(c) || c == '_' || c == '-'; });
}
// Variable and environment names share the shell's rule.
bool IsIdentifier(std::string_view s) {
  return !s.empty() && !IsDigit(s[0]) &&
         AllOf(s, [](char c) { return IsAlpha(c) || IsDigit(c) || c == '_'; });
}
// "0.15.0", "0.16.0rc2", "2.1.0.post1", "1.0.0-beta": digits first, then anything version-like.
bool IsVersion(std::string_view s) {
  if (s.empty() || !IsDigit(s[0])) return false;
  return AllOf(s, [](char c) {
    return IsAlpha(c) || IsDigit(c) || c == '.' || c == '+' || c == '-' || c == '_';
  });
}

// Optimal string alignment distance: an adjacent transposition ("stpes") counts as one edit.
int EditDistance(std::string_view a, std::string_view b) {
  std::vector<std::vector<int>> d(a.size() + 1, std::vector<int>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = static_cast<int>(i);
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

// " (did you mean 'timeout'?)" when one candidate is within two edits; the closest wins, the
// first listed on a tie. A two-letter word is two edits from every other, so the distance must
// also be less than the word's length.
template <typename Range>
std::string DidYouMean(std::string_view word, const Range& candidates) {
  std::string_view best;
  int best_distance = 3;
  for (std::string_view candidate : candidates) {
    int distance = EditDistance(word, candidate);
    if (distance < best_distance && distance < static_cast<int>(word.size())) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best.empty() ? "" : " (did you mean " + Quoted(best) + "?)";
}

// libstdc++ says "Mismatched '(' and ')' in regular expression"; keep the useful part and the
// project's lowercase style.
std::string RegexProblem(const std::regex_error& e) {
  std::string text = e.what();
  for (std::string_view tail : {" in regular expression", "."}) {
    if (text.ends_with(tail)) text.resize(text.size() - tail.size());
  }
  if (!text.empty() && text[0] >= 'A' && text[0] <= 'Z') text[0] = static_cast<char>(text[0] + 32);
  return text.empty() ? "does not compile" : text;
}

void AppendJsonString(std::string_view s, std::string& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += "\\u00";
      out += kHex[(c >> 4) & 0xf];
      out += kHex[c & 0xf];
    } else {
      out += c;
    }
  }
  out += '"';
}

bool IsJsonNumber(std::string_view s) {
  static const std::regex kNumber(R"(-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?)");
  return std::regex_match(s.begin(), s.end(), kNumber);
}

class PlanReader {
 public:
  PlanReader(std::string_view text, std::string_view file,
             const std::map<std::string, std::string>& overrides)
      : text_(text), file_(file), overrides_(overrides) {}

  ParseResult Read() {
    std::optional<Plan> plan = ReadDocument();
    // Readers visit keys in the order they need them (vars first), so order by position: the
    // user reads the list top to bottom. Problems without a position (--var) come first.
    std::stable_sort(errors_.begin(), errors_.end(), [](const Diagnostic& a, const Diagnostic& b) {
      return std::pair(a.line, a.column) < std::pair(b.line, b.column);
    });
    ParseResult result;
    if (errors_.empty()) result.plan = std::move(plan);
    result.errors = std::move(errors_);
    return result;
  }

 private:
  // One key: value of a map whose keys have been checked (strings, no duplicates, known).
  struct Entry {
    std::string name;
    YAML::Node key;
    YAML::Node value;
  };
  struct Fields {
    std::vector<Entry> entries;
    bool had_unsupported = false;
    const Entry* Get(std::string_view name) const {
      for (const Entry& e : entries) {
        if (e.name == name) return &e;
      }
      return nullptr;
    }
  };

  // --- diagnostics ---

  void Error(SourcePos pos, std::string message) {
    Diagnostic d;
    d.file = file_;
    d.line = pos.line;
    d.column = pos.column;
    d.message = std::move(message);
    d.source_line = SourceLine(pos.line);
    errors_.push_back(std::move(d));
  }

  std::string SourceLine(int line) const {
    if (line <= 0) return "";
    std::size_t start = 0;
    for (int i = 1; i < line; ++i) {
      start = text_.find('\n', start);
      if (start == std::string_view::npos) return "";
      ++start;
    }
    std::string_view rest = text_.substr(start);
    std::string_view source = rest.substr(0, rest.find('\n'));
    if (source.ends_with('\r')) source.remove_suffix(1);
    return std::string(source);
  }

  static SourcePos PosOf(const YAML::Mark& mark) {
    if (mark.is_null()) return {};
    return {mark.line + 1, mark.column + 1};
  }
  static SourcePos PosOf(const YAML::Node& node) { return PosOf(node.Mark()); }
  // An empty value has the mark of whatever follows it, so a null value points at its key.
  static SourcePos ValuePos(const Entry& e) {
    return e.value.IsNull() ? PosOf(e.key) : PosOf(e.value);
  }

  // --- maps ---

  // Keys must be strings and unique; yaml-cpp accepts duplicates silently and lookups would see
  // only the first, so the second is reported and dropped.
  std::vector<Entry> Entries(const YAML::Node& map) {
    std::vector<Entry> entries;
    for (auto it = map.begin(); it != map.end(); ++it) {
      Entry e{"", it->first, it->second};
      if (!e.key.IsScalar()) {
        Error(PosOf(e.key), "keys must be strings");
        continue;
      }
      e.name = e.key.Scalar();
      auto same = [&](const Entry& other) { return other.name == e.name; };
      if (std::any_of(entries.begin(), entries.end(), same)) {
        Error(PosOf(e.key), "duplicate key " + Quoted(e.name));
        continue;
      }
      entries.push_back(std::move(e));
    }
    return entries;
  }

  // `context` ends the unknown-key message ("in step 'build'"); empty means the top level.
  Fields ReadMap(const YAML::Node& map, Keys known, std::string_view context) {
    Fields fields;
    for (Entry& e : Entries(map)) {
      if (std::find(known.begin(), known.end(), e.name) == known.end()) {
        std::string what = context.empty()
                               ? "unknown top-level key " + Quoted(e.name)
                               : "unknown key " + Quoted(e.name) + " " + std::string(context);
        Error(PosOf(e.key), what + DidYouMean(e.name, known));
      } else {
        fields.entries.push_back(std::move(e));
      }
    }
    return fields;
  }

  // --- scalars ---

  // ${name} → the variable's value; $${ → a literal ${; any other $ stays as it is.
  std::optional<std::string> Substitute(const YAML::Node& scalar, SourcePos pos) {
    const std::string& s = scalar.Scalar();
    std::string out;
    bool ok = true;
    std::size_t i = 0;
    while (i < s.size()) {
      if (s.compare(i, 3, "$${") == 0) {
        out += "${";
        i += 3;
      } else if (s.compare(i, 2, "${") == 0) {
        std::size_t close = s.find('}', i + 2);
        if (close == std::string::npos) {
          Error(pos, "unterminated '${' (write '$${' for a literal '${')");
          return std::nullopt;
        }
        std::string name = s.substr(i + 2, close - i - 2);
        i = close + 1;
        if (!IsIdentifier(name)) {
          Error(pos,
                "invalid variable reference '${" + name + "}' (write '$${' for a literal '${')");
          ok = false;
          continue;
        }
        auto var = vars_.find(name);
        if (var == vars_.end()) {
          // When `vars:` itself is broken, every use would be noise on top of that error.
          if (!vars_broken_) {
            std::vector<std::string_view> names;
            for (const auto& [known, value] : vars_) names.push_back(known);
            Error(pos, "undefined variable " + Quoted(name) + DidYouMean(name, names));
          }
          ok = false;
        } else if (var->second) {
          out += *var->second;
        }  // else declared but unusable, and reported at the declaration
      } else {
        out += s[i++];
      }
    }
    if (!ok) return std::nullopt;
    return out;
  }

  // Any scalar reads as a string (`description: 1.0` is the text "1.0"); null and collections
  // do not.
  std::optional<std::string> String(const YAML::Node& node, SourcePos pos, std::string_view what) {
    if (!node.IsScalar()) {
      Error(pos, Quoted(what) + " must be a string");
      return std::nullopt;
    }
    return Substitute(node, pos);
  }
  std::optional<std::string> String(const Entry& e) { return String(e.value, ValuePos(e), e.name); }

  std::optional<std::string> NonEmptyString(const Entry& e) {
    std::optional<std::string> s = String(e);
    if (s && s->empty()) {
      Error(ValuePos(e), Quoted(e.name) + " must not be empty");
      return std::nullopt;
    }
    return s;
  }

  // Typed values are read from the text after substitution, so `port: ${port}` works whether
  // or not the YAML scalar was quoted.
  std::optional<bool> Bool(const Entry& e) {
    std::optional<std::string> s;
    if (e.value.IsScalar()) s = Substitute(e.value, ValuePos(e));
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
    if (s || !e.value.IsScalar()) Error(ValuePos(e), Quoted(e.name) + " must be true or false");
    return std::nullopt;
  }

  std::optional<std::int64_t> Integer(const YAML::Node& node, SourcePos pos, std::string_view what,
                                      std::int64_t min, std::int64_t max) {
    if (!node.IsScalar()) {
      Error(pos, Quoted(what) + " must be an integer");
      return std::nullopt;
    }
    std::optional<std::string> s = Substitute(node, pos);
    if (!s) return std::nullopt;
    std::optional<std::int64_t> value = ParseInteger(*s);
    if (!value) {
      Error(pos, Quoted(what) + " must be an integer");
    } else if (*value < min || *value > max) {
      Error(pos, Quoted(what) + " must be between " + std::to_string(min) + " and " +
                     std::to_string(max));
      return std::nullopt;
    }
    return value;
  }
  std::optional<std::int64_t> Integer(const Entry& e, std::int64_t min, std::int64_t max) {
    return Integer(e.value, ValuePos(e), e.name, min, max);
  }

  std::optional<Duration> DurationValue(const Entry& e) {
    if (!e.value.IsScalar()) {
      Error(ValuePos(e), Quoted(e.name) + " must be a duration " + std::string(kDurationHint));
      return std::nullopt;
    }
    std::optional<std::string> s = Substitute(e.value, ValuePos(e));
    if (!s) return std::nullopt;
    std::optional<Duration> d = ParseDuration(*s);
    if (!d) Error(ValuePos(e), "invalid duration " + Quoted(*s) + " " + std::string(kDurationHint));
    return d;
  }

  std::optional<std::uint64_t> SizeValue(const Entry& e) {
    if (!e.value.IsScalar()) {
      Error(ValuePos(e), Quoted(e.name) + " must be a size " + std::string(kSizeHint));
      return std::nullopt;
    }
    std::optional<std::string> s = Substitute(e.value, ValuePos(e));
    if (!s) return std::nullopt;
    std::optional<std::uint64_t> size = ParseSize(*s);
    if (!size) Error(ValuePos(e), "invalid size " + Quoted(*s) + " " + std::string(kSizeHint));
    return size;
  }

  // The pattern is kept as written, "(?i)" included; compiling it here only proves it compiles.
  std::optional<std::string> Regex(const YAML::Node& node, SourcePos pos, std::string_view what) {
    std::optional<std::string> pattern = String(node, pos, what);
    if (!pattern) return std::nullopt;
    std::string_view body = *pattern;
    auto flags = std::regex::ECMAScript;
    if (body.starts_with("(?i)")) {
      body.remove_prefix(4);
      flags |= std::regex::icase;
    }
    if (body.empty()) {
      Error(pos, Quoted(what) + " must not be an empty pattern");
      return std::nullopt;
    }
    try {
      std::regex compiled(body.begin(), body.end(), flags);
    } catch (const std::regex_error& e) {
      Error(pos, "invalid regex " + Quoted(*pattern) + ": " + RegexProblem(e));
      return std::nullopt;
    }
    return pattern;
  }

  // --- composite values ---

  std::optional<Command> CommandValue(const Entry& e) {
    std::string must = Quoted(e.name) + " must be a string or a list of strings";
    Command command;
    if (e.value.IsScalar()) {
      std::optional<std::string> script = Substitute(e.value, ValuePos(e));
      if (!script) return std::nullopt;
      if (script->find_first_not_of(" \t\n") == std::string::npos) {
        Error(ValuePos(e), Quoted(e.name) + " must not be empty");
        return std::nullopt;
      }
      command.shell = true;
      command.script = *script;
      return command;
    }
    if (!e.value.IsSequence()) {
      Error(ValuePos(e), must);
      return std::nullopt;
    }
    if (e.value.size() == 0) {
      Error(ValuePos(e), Quoted(e.name) + " must not be an empty list");
      return std::nullopt;
    }
    bool ok = true;
    for (auto it = e.value.begin(); it != e.value.end(); ++it) {
      YAML::Node arg = *it;
      if (!arg.IsScalar()) {
        Error(PosOf(arg), must);
        ok = false;
      } else if (std::optional<std::string> s = Substitute(arg, PosOf(arg))) {
        command.argv.push_back(*s);
      } else {
        ok = false;
      }
    }
    if (!ok) return std::nullopt;
    if (command.argv[0].empty()) {
      Error(ValuePos(e), Quoted(e.name) + " must not start with an empty program name");
      return std::nullopt;
    }
    return command;
  }

  std::map<std::string, std::string> EnvMap(const Entry& e) {
    std::map<std::string, std::string> env;
    if (e.value.IsNull()) return env;
    if (!e.value.IsMap()) {
      Error(ValuePos(e), Quoted(e.name) + " must be a map of names to strings");
      return env;
    }
    for (const Entry& var : Entries(e.value)) {
      if (!IsIdentifier(var.name)) {
        Error(PosOf(var.key), "invalid environment variable name " + Quoted(var.name));
        continue;
      }
      if (!var.value.IsScalar()) {
        Error(ValuePos(var),
              Quoted(e.name) + " value for " + Quoted(var.name) + " must be a string");
        continue;
      }
      if (std::optional<std::string> value = Substitute(var.value, ValuePos(var)))
        env[var.name] = *value;
    }
    return env;
  }

  // A YAML body becomes compact JSON. Plain scalars that look like JSON numbers, true, false or
  // null keep that type; quoted scalars are always strings. Depth is bounded because an alias
  // can make a node contain itself.
  bool AppendJson(const YAML::Node& node, SourcePos body_pos, int depth, std::string& out) {
    if (depth > 64) {
      Error(body_pos, "'body' is nested too deeply");
      return false;
    }
    if (node.IsNull()) {
      out += "null";
    } else if (node.IsScalar()) {
      std::optional<std::string> s = Substitute(node, PosOf(node));
      if (!s) return false;
      bool plain = node.Tag() == "?";
      if (plain && (*s == "true" || *s == "false" || IsJsonNumber(*s))) {
        out += *s;
      } else {
        AppendJsonString(*s, out);
      }
    } else if (node.IsSequence()) {
      out += '[';
      bool first = true;
      for (auto it = node.begin(); it != node.end(); ++it) {
        if (!first) out += ',';
        first = false;
        if (!AppendJson(*it, body_pos, depth + 1, out)) return false;
      }
      out += ']';
    } else if (node.IsMap()) {
      out += '{';
      bool first = true;
      for (const Entry& e : Entries(node)) {
        if (!first) out += ',';
        first = false;
        AppendJsonString(e.name, out);
        out += ':';
        if (!AppendJson(e.value, body_pos, depth + 1, out)) return false;
      }
      out += '}';
    }
    return true;
  }

  // --- checks ---

  std::vector<Check> ReadChecks(const Entry& e) {
    std::vector<Check> checks;
    if (e.value.IsNull()) return checks;
    if (!e.value.IsSequence()) {
      Error(ValuePos(e), Quoted(e.name) + " must be a list of checks");
      return checks;
    }
    for (auto it = e.value.begin(); it != e.value.end(); ++it) {
      if (std::optional<Check> check = ReadCheck(*it)) checks.push_back(std::move(*check));
    }
    return checks;
  }

  std::optional<Check> ReadCheck(const YAML::Node& node) {
    if (!node.IsMap()) {
      Error(PosOf(node), "a check must be a map with one of: " + std::string(kKindList));
      return std::nullopt;
    }
    // Peek at the kind first so that unknown keys can say which check they are in.
    std::string kind;
    for (auto it = node.begin(); it != node.end() && kind.empty(); ++it) {
      YAML::Node key = it->first;
      if (key.IsScalar() &&
          std::find(kCheckKinds.begin(), kCheckKinds.end(), key.Scalar()) != kCheckKinds.end())
        kind = key.Scalar();
    }
    Fields fields =
        ReadMap(node, kCheckKeys, kind.empty() ? "in check" : "in " + Quoted(kind) + " check");
    std::vector<const Entry*> kinds;
    for (const Entry& e : fields.entries) {
      if (std::find(kCheckKinds.begin(), kCheckKinds.end(), e.name) != kCheckKinds.end())
        kinds.push_back(&e);
    }
    Check check;
    check.pos = PosOf(node);
    if (kinds.empty()) {
      Error(check.pos,
            "check has no kind (expected exactly one of: " + std::string(kKindList) + ")");
    } else {
      if (kinds.size() > 1) {
        Error(PosOf(kinds[1]->key), "check has more than one kind, " + Quoted(kinds[0]->name) +
                                        " and " + Quoted(kinds[1]->name) +
                                        " (expected exactly one of: " + std::string(kKindList) +
                                        ")");
      }
      ReadCheckKind(*kinds[0], check);
    }
    for (std::string_view key : kRunOnlyKeys) {
      const Entry* e = fields.Get(key);
      if (!e) continue;
      if (!kinds.empty() && kinds[0]->name != "run") {
        Error(PosOf(e->key), Quoted(key) + " is only allowed in a 'run' check");
      } else if (key == "output_matches") {
        if (auto re = Regex(e->value, ValuePos(*e), key)) check.output_matches = *re;
      } else if (key == "version_at_least" || key == "version_below") {
        std::optional<std::string> v = String(*e);
        if (v && !IsVersion(*v)) {
          Error(ValuePos(*e),
                "invalid version " + Quoted(*v) + " (expected e.g. 0.15.0 or 0.16.0rc2)");
        } else if (v) {
          (key == "version_below" ? check.version_below : check.version_at_least) = *v;
        }
      } else {
        check.env = EnvMap(*e);
      }
    }
    if (const Entry* e = fields.Get("after")) check.after = DurationValue(*e).value_or(check.after);
    if (const Entry* e = fields.Get("every")) check.every = DurationValue(*e).value_or(check.every);
    if (const Entry* e = fields.Get("within")) check.within = DurationValue(*e);
    if (const Entry* e = fields.Get("timeout"))
      check.timeout = DurationValue(*e).value_or(check.timeout);
    if (const Entry* every = fields.Get("every"); every && !fields.Get("within"))
      Error(PosOf(every->key), "'every' needs 'within' (how long to keep trying)");
    return check;
  }

  void ReadCheckKind(const Entry& e, Check& check) {
    const YAML::Node& v = e.value;
    if (e.name == "run") {
      check.kind = CheckKind::kRun;
      if (auto command = CommandValue(e)) check.command = *command;
    } else if (e.name == "http") {
      check.kind = CheckKind::kHttp;
      ReadHttp(e, check);
    } else if (e.name == "tcp") {
      check.kind = CheckKind::kTcp;
      check.host = "127.0.0.1";
      if (v.IsScalar()) {
        ReadHostPort(e, check);
      } else if (v.IsMap()) {
        Fields f = ReadMap(v, kTcpKeys, "in 'tcp'");
        if (const Entry* host = f.Get("host")) check.host = NonEmptyString(*host).value_or("");
        ReadPort(f, v, "tcp", check);
      } else {
        Error(ValuePos(e), "'tcp' must be HOST:PORT or a map with 'port'");
      }
    } else if (e.name == "file") {
      check.kind = CheckKind::kFile;
      if (v.IsScalar()) {
        check.path = NonEmptyString(e).value_or("");
      } else if (v.IsMap()) {
        Fields f = ReadMap(v, kFileKeys, "in 'file'");
        if (const Entry* path = f.Get("path")) {
          check.path = NonEmptyString(*path).value_or("");
        } else {
          Error(PosOf(v), "missing required key 'path' in 'file'");
        }
        if (const Entry* absent = f.Get("absent")) check.absent = Bool(*absent).value_or(false);
        if (const Entry* min_size = f.Get("min_size")) {
          check.min_size = SizeValue(*min_size);
          if (check.absent)
            Error(PosOf(min_size->key), "'min_size' cannot be used with 'absent: true'");
        }
      } else {
        Error(ValuePos(e), "'file' must be a path or a map with 'path'");
      }
    } else if (e.name == "command") {
      check.kind = CheckKind::kCommand;
      std::optional<std::string> name = NonEmptyString(e);
      if (name && name->find_first_of(" \t\n") != std::string::npos) {
        Error(ValuePos(e), "'command' must be a program name (e.g. hf), not a command line");
      } else if (name) {
        check.name = *name;
      }
    } else if (e.name == "disk_free") {
      check.kind = CheckKind::kDiskFree;
      if (!v.IsMap()) {
        Error(ValuePos(e), "'disk_free' must be a map with 'path' and 'at_least'");
        return;
      }
      Fields f = ReadMap(v, kDiskFreeKeys, "in 'disk_free'");
      if (const Entry* path = f.Get("path")) {
        check.path = NonEmptyString(*path).value_or("");
      } else {
        Error(PosOf(v), "missing required key 'path' in 'disk_free'");
      }
      if (const Entry* at_least = f.Get("at_least")) {
        check.at_least = SizeValue(*at_least).value_or(0);
      } else {
        Error(PosOf(v), "missing required key 'at_least' in 'disk_free'");
      }
      // A download's destination: what is already there counts (it resumes), and the path
      // may not exist yet.
      if (const Entry* present = f.Get("count_present"))
        check.credit_existing = Bool(*present).value_or(false);
    } else if (e.name == "weights_complete") {
      check.kind = CheckKind::kWeightsComplete;
      if (v.IsScalar()) {
        check.path = NonEmptyString(e).value_or("");
      } else if (v.IsMap()) {
        Fields f = ReadMap(v, kWeightsKeys, "in 'weights_complete'");
        if (const Entry* path = f.Get("path")) {
          check.path = NonEmptyString(*path).value_or("");
        } else {
          Error(PosOf(v), "missing required key 'path' in 'weights_complete'");
        }
        if (const Entry* sha = f.Get("sha256")) ReadDigests(*sha, check);
      } else {
        Error(ValuePos(e),
              "'weights_complete' must be the path of a model directory or a map "
              "with 'path' (and 'sha256')");
      }
    } else if (e.name == "service") {
      check.kind = CheckKind::kService;
      if (v.IsScalar()) {
        check.unit = UnitName(e).value_or("");
      } else if (v.IsMap()) {
        Fields f = ReadMap(v, kServiceCheckKeys, "in 'service' check");
        if (const Entry* u = f.Get("unit")) {
          check.unit = UnitName(*u).value_or("");
        } else {
          Error(PosOf(v), "missing required key 'unit' in 'service'");
        }
        if (const Entry* st = f.Get("state")) {
          std::optional<std::string> state = String(*st);
          if (state == "started" || state == "stopped") {
            check.unit_state = *state;
          } else if (state) {
            Error(ValuePos(*st),
                  "'state' of a 'service' check must be started or stopped, not " + Quoted(*state));
          }
        }
        if (const Entry* en = f.Get("enabled")) check.enabled = Bool(*en);
      } else {
        Error(ValuePos(e), "'service' must be a unit name or a map with 'unit'");
      }
    } else if (e.name == "process") {
      check.kind = CheckKind::kProcess;
      if (v.IsScalar()) {
        if (auto re = Regex(v, ValuePos(e), "process")) check.match = *re;
      } else if (v.IsMap()) {
        Fields f = ReadMap(v, kProcessKeys, "in 'process'");
        if (const Entry* m = f.Get("match")) {
          if (auto re = Regex(m->value, ValuePos(*m), "match")) check.match = *re;
        } else {
          Error(PosOf(v), "missing required key 'match' in 'process'");
        }
        if (const Entry* a = f.Get("absent")) check.absent = Bool(*a).value_or(false);
      } else {
        Error(ValuePos(e), "'process' must be a pattern or a map with 'match'");
      }
    } else if (e.name == "gpus_free") {
      check.kind = CheckKind::kGpusFree;
      if (v.IsMap()) {
        Fields f = ReadMap(v, kGpusCheckKeys, "in 'gpus_free' check");
        ReadGpuSelection(f, check.gpu);
      } else if (!v.IsNull()) {
        Error(ValuePos(e), "'gpus_free' must be a map (e.g. {gpus: [0, 1], max_used: 1GiB})");
      }
    } else if (e.name == "version") {
      // A run check that compares the first version in the output.
      check.kind = CheckKind::kRun;
      if (!v.IsMap()) {
        Error(ValuePos(e),
              "'version' must be a map with 'command' or 'run', and 'at_least' or "
              "'below'");
        return;
      }
      Fields f = ReadMap(v, kVersionKeys, "in 'version'");
      const Entry* run = f.Get("run");
      const Entry* command = f.Get("command");
      if (run && command) {
        Error(PosOf(command->key), "'version' takes 'command' or 'run', not both");
      } else if (run) {
        if (std::optional<Command> c = CommandValue(*run)) check.command = *c;
      } else if (command) {
        std::optional<std::string> name = NonEmptyString(*command);
        if (name && name->find_first_of(" \t\n") != std::string::npos) {
          Error(ValuePos(*command), "'command' must be a program name (its --version is asked)");
        } else if (name) {
          check.command.argv = {*name, "--version"};
        }
      } else {
        Error(PosOf(v), "missing required key 'command' or 'run' in 'version'");
      }
      for (const char* key : {"at_least", "below"}) {
        const Entry* x = f.Get(key);
        if (!x) continue;
        std::optional<std::string> ver = String(*x);
        if (ver && !IsVersion(*ver)) {
          Error(ValuePos(*x),
                "invalid version " + Quoted(*ver) + " (expected e.g. 0.15.0 or 0.16.0rc2)");
        } else if (ver) {
          (std::string_view(key) == "below" ? check.version_below : check.version_at_least) = *ver;
        }
      }
      if (!f.Get("at_least") && !f.Get("below"))
        Error(PosOf(v), "'version' needs 'at_least' or 'below'");
    } else if (e.name == "port_free") {
      check.kind = CheckKind::kPortFree;
      check.host = "0.0.0.0";
      if (v.IsScalar()) {
        check.port = static_cast<int>(Integer(e, 1, 65535).value_or(0));
      } else if (v.IsMap()) {
        Fields f = ReadMap(v, kPortFreeKeys, "in 'port_free'");
        if (const Entry* host = f.Get("host")) check.host = NonEmptyString(*host).value_or("");
        ReadPort(f, v, "port_free", check);
      } else {
        Error(ValuePos(e), "'port_free' must be a port or a map with 'port'");
      }
    }
  }

  void ReadPort(const Fields& f, const YAML::Node& map, std::string_view where, Check& check) {
    if (const Entry* port = f.Get("port")) {
      check.port = static_cast<int>(Integer(*port, 1, 65535).value_or(0));
    } else {
      Error(PosOf(map), "missing required key 'port' in " + Quoted(where));
    }
  }

  // "HOST:PORT"; the last colon splits, and brackets around an IPv6 host are dropped.
  void ReadHostPort(const Entry& e, Check& check) {
    std::optional<std::string> text = String(e);
    if (!text) return;
    std::size_t colon = text->rfind(':');
    std::string host = colon == std::string::npos ? "" : text->substr(0, colon);
    std::optional<std::int64_t> port;
    if (colon != std::string::npos) port = ParseInteger(std::string_view(*text).substr(colon + 1));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
      host = host.substr(1, host.size() - 2);
    if (host.empty() || !port || *port < 1 || *port > 65535) {
      Error(ValuePos(e), "invalid 'tcp' address " + Quoted(*text) +
                             " (expected HOST:PORT with a port from 1 to 65535)");
      return;
    }
    check.host = host;
    check.port = static_cast<int>(*port);
  }

  void ReadHttp(const Entry& e, Check& check) {
    const YAML::Node& v = e.value;
    if (v.IsScalar()) {
      if (std::optional<std::string> url = String(e)) CheckUrl(*url, ValuePos(e), check);
      return;
    }
    if (!v.IsMap()) {
      Error(ValuePos(e), "'http' must be a URL or a map with 'url'");
      return;
    }
    Fields f = ReadMap(v, kHttpKeys, "in 'http'");
    if (const Entry* url = f.Get("url")) {
      if (std::optional<std::string> s = String(*url)) CheckUrl(*s, ValuePos(*url), check);
    } else {
      Error(PosOf(v), "missing required key 'url' in 'http'");
    }
    // A bad method is reported once; 'body' is then not judged against it.
    bool method_known = true;
    if (const Entry* method = f.Get("method")) {
      std::optional<std::string> m = String(*method);
      method_known = m && (*m == "GET" || *m == "POST");
      if (method_known) {
        check.method = *m;
      } else if (m) {
        Error(ValuePos(*method), "'method' must be GET or POST");
      }
    }
    if (const Entry* body = f.Get("body")) {
      if (body->value.IsNull()) {
        Error(ValuePos(*body), "'body' must be a string, a map or a list");
      } else if (body->value.IsScalar()) {
        check.body = String(*body).value_or("");
      } else {
        std::string json;
        if (AppendJson(body->value, ValuePos(*body), 0, json)) check.body = json;
      }
      if (method_known && check.method != "POST")
        Error(PosOf(body->key), "'body' requires 'method: POST'");
    }
    if (const Entry* status = f.Get("status"))
      check.status = static_cast<int>(Integer(*status, 100, 599).value_or(200));
    if (const Entry* contains = f.Get("body_contains"))
      check.body_contains = String(*contains).value_or("");
    if (const Entry* json = f.Get("json")) ReadJsonExpectations(*json, check);
  }

  // json: [{path: data.*.id, contains: /models/kimi}, {path: object, equals: list}]
  void ReadJsonExpectations(const Entry& e, Check& check) {
    const YAML::Node& v = e.value;
    if (!v.IsSequence() && !v.IsMap()) {
      Error(ValuePos(e), "'json' must be a list of {path, equals|contains}");
      return;
    }
    std::vector<YAML::Node> items;
    if (v.IsMap()) {
      items.push_back(v);
    } else {
      for (auto it = v.begin(); it != v.end(); ++it) items.push_back(*it);
    }
    for (const YAML::Node& item : items) {
      if (!item.IsMap()) {
        Error(PosOf(item), "each 'json' expectation must be a map {path, equals|contains}");
        continue;
      }
      Fields f = ReadMap(item, kJsonKeys, "in 'json'");
      JsonExpectation x;
      if (const Entry* path = f.Get("path")) {
        x.path = NonEmptyString(*path).value_or("");
      } else {
        Error(PosOf(item), "missing required key 'path' in 'json'");
      }
      const Entry* equals = f.Get("equals");
      const Entry* contains = f.Get("contains");
      if (equals && contains) {
        Error(PosOf(contains->key), "a 'json' expectation takes 'equals' or 'contains', not both");
      } else if (equals || contains) {
        const Entry* which = equals ? equals : contains;
        x.op = equals ? JsonExpectation::Op::kEquals : JsonExpectation::Op::kContains;
        if (!which->value.IsScalar()) {
          Error(ValuePos(*which), Quoted(which->name) + " must be a string, a number or a boolean");
        } else {
          x.value = String(*which).value_or("");
        }
      } else {
        Error(PosOf(item), "a 'json' expectation needs 'equals' or 'contains'");
      }
      check.json.push_back(std::move(x));
    }
  }

  // sha256: {model-00001-of-00064.safetensors: 64 hex digits, …}
  void ReadDigests(const Entry& e, Check& check) {
    if (!e.value.IsMap()) {
      Error(ValuePos(e), "'sha256' must be a map of file names to hex digests");
      return;
    }
    for (const Entry& file : Entries(e.value)) {
      std::optional<std::string> digest = String(file);
      if (!digest) continue;
      bool hex = digest->size() == 64 && std::all_of(digest->begin(), digest->end(), [](char c) {
                   return IsDigit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
                 });
      if (!hex) {
        Error(ValuePos(file),
              "invalid sha256 digest for " + Quoted(file.name) + " (expected 64 hex digits)");
        continue;
      }
      if (file.name.starts_with("/") || file.name.find("..") != std::string::npos) {
        Error(PosOf(file.key),
              "sha256 file names are relative to the model directory, not " + Quoted(file.name));
        continue;
      }
      std::string lower = *digest;
      for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      check.sha256[file.name] = lower;
    }
  }

  void CheckUrl(const std::string& url, SourcePos pos, Check& check) {
    std::size_t separator = url.find("://");
    std::string scheme = url.substr(0, separator == std::string::npos ? 0 : separator);
    std::transform(scheme.begin(), scheme.end(), scheme.begin(),
                   [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; });
    if (scheme == "https") {
      Error(pos,
            "https is not supported in 'http' checks (probe the server on loopback over "
            "http://)");
      return;
    }
    bool ok = scheme == "http" && url.find_first_of(" \t\n") == std::string::npos;
    if (ok) {
      std::string_view rest = std::string_view(url).substr(7);
      std::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
      std::string_view host = authority;
      std::string_view port;
      if (authority.starts_with('[')) {
        std::size_t close = authority.find(']');
        ok = close != std::string_view::npos && close > 1;
        if (ok) {
          host = authority.substr(1, close - 1);
          std::string_view after = authority.substr(close + 1);
          ok = after.empty() || after.starts_with(':');
          if (ok && !after.empty()) port = after.substr(1);
        }
      } else if (std::size_t colon = authority.rfind(':'); colon != std::string_view::npos) {
        host = authority.substr(0, colon);
        port = authority.substr(colon + 1);
        if (port.empty()) port = "x";  // "http://h:/" has a colon and no port
      }
      if (ok) ok = !host.empty();
      if (ok && !port.empty()) {
        std::optional<std::int64_t> p = ParseInteger(port);
        ok = p && *p >= 1 && *p <= 65535;
      }
    }
    if (!ok) {
      Error(pos, "invalid url " + Quoted(url) + " (expected http://HOST[:PORT]/PATH)");
      return;
    }
    check.url = url;
  }

  // --- steps ---

  std::vector<Step> ReadSteps(const Entry& e, bool on_failure) {
    std::vector<Step> steps;
    bool empty = e.value.IsNull() || (e.value.IsSequence() && e.value.size() == 0);
    if (empty) {
      if (!on_failure) Error(ValuePos(e), "'steps' must not be empty");
      return steps;
    }
    if (!e.value.IsSequence()) {
      Error(ValuePos(e), Quoted(e.name) + " must be a list of steps");
      return steps;
    }
    int index = 0;
    for (auto it = e.value.begin(); it != e.value.end(); ++it) {
      ++index;
      if (std::optional<Step> step = ReadStep(*it, index, on_failure))
        steps.push_back(std::move(*step));
    }
    return steps;
  }

  std::optional<Step> ReadStep(const YAML::Node& node, int index, bool on_failure) {
    if (!node.IsMap()) {
      Error(PosOf(node), "a step must be a map with 'id' and 'run'");
      return std::nullopt;
    }
    // Name the step in messages by its id when it has a usable one, else by its place.
    std::string label =
        std::string(on_failure ? "on_failure step #" : "step #") + std::to_string(index);
    for (auto it = node.begin(); it != node.end(); ++it) {
      YAML::Node key = it->first;
      YAML::Node value = it->second;
      if (key.IsScalar() && key.Scalar() == "id" && value.IsScalar() && IsStepId(value.Scalar())) {
        label = std::string(on_failure ? "on_failure step " : "step ") + Quoted(value.Scalar());
        break;
      }
    }
    Fields f = ReadMap(node, kStepKeys, "in " + label);
    Step step;
    step.pos = PosOf(node);
    if (const Entry* e = f.Get("id")) {
      std::optional<std::string> id = String(*e);
      if (id && !IsStepId(*id)) {
        Error(ValuePos(*e),
              "invalid step id " + Quoted(*id) + " (use lowercase letters, digits, '_' and '-')");
      } else if (id) {
        auto [first, inserted] = step_ids_.emplace(*id, ValuePos(*e));
        if (!inserted) {
          Error(ValuePos(*e), "duplicate step id " + Quoted(*id) + " (first defined at line " +
                                  std::to_string(first->second.line) + ")");
        }
        step.id = *id;
      }
    } else {
      Error(step.pos, "missing required key 'id' in " + label);
    }
    std::vector<const Entry*> actions;
    for (const Entry& e : f.entries)
      if (std::find(kActionKeys.begin(), kActionKeys.end(), e.name) != kActionKeys.end())
        actions.push_back(&e);
    if (actions.empty()) {
      Error(step.pos, "missing required key 'run' in " + label +
                          " (or another action: " + std::string(kActionList).substr(5) + ")");
    } else {
      if (actions.size() > 1)
        Error(PosOf(actions[1]->key), "a step has one action: " + Quoted(actions[0]->name) +
                                          " or " + Quoted(actions[1]->name) + ", not both");
      ReadAction(*actions[0], step);
      const std::string& kind = actions[0]->name;
      for (const Entry& other : f.entries) {
        auto in = [&](const auto& keys) {
          return std::find(keys.begin(), keys.end(), other.name) != keys.end();
        };
        if (kind == "approval" && in(kCommandOnlyStepKeys)) {
          Error(PosOf(other.key), Quoted(other.name) +
                                      " cannot be used with 'approval' (an approval step runs "
                                      "no command)");
        } else if (kind != "run" && kind != "approval" &&
                   (in(kRunOnlyStepKeys) || (other.name == "env" && kind != "download"))) {
          Error(PosOf(other.key), Quoted(other.name) + " cannot be used with " + Quoted(kind) +
                                      " (a built-in action decides it)");
        }
      }
    }
    if (const Entry* e = f.Get("background")) step.background = Bool(*e).value_or(false);
    if (const Entry* e = f.Get("env")) step.env = EnvMap(*e);
    if (const Entry* e = f.Get("cwd")) step.cwd = String(*e).value_or("");
    if (const Entry* e = f.Get("timeout")) {
      step.timeout = DurationValue(*e);
      if (step.background && !step.approval) {  // an approval step has neither: said above
        Error(PosOf(e->key),
              "'timeout' cannot be used with 'background: true' (a background "
              "step is bounded by its verify 'within')");
      }
    }
    if (const Entry* e = f.Get("grace")) step.grace = DurationValue(*e).value_or(step.grace);
    bool retries_unreadable = false;  // reported on its own; must not also read as "none"
    if (const Entry* e = f.Get("retries")) {
      std::optional<std::int64_t> retries = Integer(*e, 0, 100);
      retries_unreadable = !retries;
      step.retries = static_cast<int>(retries.value_or(0));
    }
    if (const Entry* e = f.Get("retry_delay"))
      step.retry_delay = DurationValue(*e).value_or(step.retry_delay);
    if (const Entry* e = f.Get("verify")) step.verify = ReadChecks(*e);
    if (const Entry* e = f.Get("skip_if")) step.skip_if = ReadChecks(*e);
    const bool download = step.kind == ActionKind::kDownload;
    if (download && !f.Get("retries")) step.retries = kDownloadRetries;
    if (const Entry* e = f.Get("watch"))
      step.watch = ReadWatch(*e, step.retries > 0 || retries_unreadable);
    if (const Entry* e = f.Get("idempotent")) step.idempotent = Bool(*e).value_or(false);
    if (const Entry* e = f.Get("secrets")) {
      step.secrets = SecretNames(*e);
      if (step.background && step.kind == ActionKind::kRun)
        Error(PosOf(e->key),
              "'secrets' cannot be given to a background 'run' step (its output "
              "goes to the log without being redacted)");
    }
    if (download) DownloadDefaults(f.Get("watch"), step);
    if (step.kind == ActionKind::kService &&
        (step.service.state == "started" || step.service.state == "restarted"))
      AddUnitExitPatterns(step);
    return step;
  }

  // A server that dies while it is being verified is noticed from systemd's own journal line
  // at once, not when the readiness check runs out.
  void AddUnitExitPatterns(Step& step) {
    std::string unit;
    for (char c : step.service.unit) {
      if (std::string_view(".\\^$|?*+()[]{}").find(c) != std::string_view::npos) unit += '\\';
      unit += c;
    }
    FailPattern exited;
    exited.pattern =
        "^" + unit + ": Main process exited, code=(killed|dumped|exited, status=[1-9])";
    exited.pos = step.pos;
    exited.explanation = "the server's main process died (the lines before say why)";
    exited.set = "systemd: the unit's main process died";
    step.watch.fail_on.push_back(exited);
    FailPattern limit;
    limit.pattern = "^" + unit + ": Start request repeated too quickly";
    limit.pos = step.pos;
    limit.explanation = "systemd gave up restarting the server (StartLimitBurst)";
    limit.set = "systemd: the unit's main process died";
    step.watch.fail_on.push_back(limit);
  }

  // A download runs in the background, is watched by the bytes under its destination, and is
  // restarted when they stop growing (hf resumes); the errors no retry fixes fail it at once.
  // The plan's own watch keys win.
  void DownloadDefaults(const Entry* watch_entry, Step& step) {
    step.background = true;
    step.idempotent = true;
    bool own_on_stall = watch_entry && watch_entry->value.IsMap() && watch_entry->value["on_stall"];
    if (!step.watch.progress) {
      ProgressSpec spec;
      spec.path = step.download.to;
      spec.stall_after = kDownloadStallAfter;
      spec.total = step.download.size;
      spec.pos = step.pos;
      step.watch.progress = spec;
    }
    if (!own_on_stall && step.retries > 0) step.watch.on_stall = OnStall::kRestart;
    AddFailOnSet("hf", step.pos, step.watch);
    if (std::none_of(step.secrets.begin(), step.secrets.end(),
                     [](const std::string& n) { return n == "HF_TOKEN"; }) &&
        secrets_.contains("HF_TOKEN"))
      step.secrets.push_back("HF_TOKEN");
  }

  // `secrets: [HF_TOKEN]`: names the plan's `secrets:` section defines.
  std::vector<std::string> SecretNames(const Entry& e) {
    std::vector<std::string> names;
    for (const auto& [name, pos] : StringList(e)) {
      if (!secrets_.contains(name)) {
        Error(pos, "unknown secret " + Quoted(name) +
                       (secrets_.empty() ? " (the plan has no 'secrets:' section)"
                                         : " (define it under the plan's 'secrets:')"));
        continue;
      }
      names.push_back(name);
    }
    return names;
  }

  // A scalar or a list of scalars, each with where it was written.
  std::vector<std::pair<std::string, SourcePos>> StringList(const Entry& e) {
    std::vector<std::pair<std::string, SourcePos>> out;
    if (e.value.IsScalar()) {
      if (auto v = String(e)) out.emplace_back(*v, ValuePos(e));
      return out;
    }
    if (!e.value.IsSequence()) {
      Error(ValuePos(e), Quoted(e.name) + " must be a string or a list of strings");
      return out;
    }
    for (auto it = e.value.begin(); it != e.value.end(); ++it) {
      YAML::Node item = *it;
      if (!item.IsScalar()) {
        Error(PosOf(item), Quoted(e.name) + " must be a string or a list of strings");
        continue;
      }
      if (auto v = String(item, PosOf(item), e.name)) out.emplace_back(*v, PosOf(item));
    }
    return out;
  }

  std::optional<std::string> AbsolutePath(const Entry& e) {
    std::optional<std::string> path = NonEmptyString(e);
    if (path && !path->starts_with("/")) {
      Error(ValuePos(e), Quoted(e.name) + " must be an absolute path, not " + Quoted(*path));
      return std::nullopt;
    }
    return path;
  }

  // --- actions ---

  void ReadAction(const Entry& e, Step& step) {
    const YAML::Node& v = e.value;
    if (e.name == "run") {
      step.kind = ActionKind::kRun;
      if (std::optional<Command> command = CommandValue(e)) step.run = *command;
    } else if (e.name == "approval") {
      step.kind = ActionKind::kApproval;
      step.approval = NonEmptyString(e).value_or("");
    } else if (e.name == "service") {
      step.kind = ActionKind::kService;
      ReadService(e, step.service);
    } else if (e.name == "kill") {
      step.kind = ActionKind::kKill;
      if (v.IsScalar()) {
        if (auto re = Regex(v, ValuePos(e), "kill")) step.kill.match = *re;
        return;
      }
      if (!v.IsMap()) {
        Error(ValuePos(e), "'kill' must be a pattern or a map with 'match'");
        return;
      }
      Fields f = ReadMap(v, kKillKeys, "in 'kill'");
      if (const Entry* m = f.Get("match")) {
        if (auto re = Regex(m->value, ValuePos(*m), "match")) step.kill.match = *re;
      } else {
        Error(PosOf(v), "missing required key 'match' in 'kill'");
      }
      if (const Entry* g = f.Get("grace"))
        step.kill.grace = DurationValue(*g).value_or(step.kill.grace);
      if (const Entry* w = f.Get("whole_groups")) step.kill.whole_groups = Bool(*w).value_or(true);
    } else if (e.name == "gpus_free") {
      step.kind = ActionKind::kGpusFree;
      GpusFreeAction& a = step.gpus_free;
      if (v.IsNull()) return;  // every GPU, the defaults
      if (!v.IsMap()) {
        Error(ValuePos(e), "'gpus_free' must be a map (e.g. {gpus: [0, 1], max_used: 1GiB})");
        return;
      }
      Fields f = ReadMap(v, kGpusFreeKeys, "in 'gpus_free'");
      ReadGpuSelection(f, a.gpu);
      if (const Entry* x = f.Get("stable_for"))
        a.stable_for = DurationValue(*x).value_or(a.stable_for);
      if (const Entry* x = f.Get("every")) a.every = DurationValue(*x).value_or(a.every);
      if (const Entry* x = f.Get("within")) a.within = DurationValue(*x).value_or(a.within);
      if (const Entry* x = f.Get("kill")) a.kill = Bool(*x).value_or(false);
      if (const Entry* x = f.Get("grace")) {
        a.grace = DurationValue(*x).value_or(a.grace);
        if (!a.kill)
          Error(PosOf(x->key), "'grace' needs 'kill: true' (nothing is stopped without it)");
      }
      if (a.every.count() < 100) {
        Error(PosOf(v), "'every' must be at least 100ms");
      } else if (a.within < a.stable_for) {
        Error(PosOf(v), "'within' (" + FormatDuration(a.within) +
                            ") must be at least 'stable_for' (" + FormatDuration(a.stable_for) +
                            ")");
      }
    } else if (e.name == "remove") {
      step.kind = ActionKind::kRemove;
      if (v.IsScalar()) {
        step.remove.path = AbsolutePath(e).value_or("");
      } else if (v.IsMap()) {
        Fields f = ReadMap(v, kRemoveKeys, "in 'remove'");
        if (const Entry* p = f.Get("path")) {
          step.remove.path = AbsolutePath(*p).value_or("");
        } else {
          Error(PosOf(v), "missing required key 'path' in 'remove'");
        }
      } else {
        Error(ValuePos(e), "'remove' must be a path or a map with 'path'");
      }
    } else if (e.name == "download") {
      step.kind = ActionKind::kDownload;
      ReadDownload(e, step.download);
    }
  }

  void ReadGpuSelection(const Fields& f, GpuSelection& gpu) {
    if (const Entry* g = f.Get("gpus")) {
      if (g->value.IsScalar()) {
        // "all", or "0,1,2,3" (so that a variable can hold the list)
        std::optional<std::string> text = String(*g);
        if (!text || *text == "all") return ReadMaxUsed(f, gpu);
        std::string_view rest = *text;
        while (true) {
          size_t comma = rest.find(',');
          std::string_view item = rest.substr(0, comma);
          while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
          while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
          std::optional<std::int64_t> n = ParseInteger(item);
          if (!n || *n < 0 || *n > 1023) {
            Error(ValuePos(*g),
                  "'gpus' must be all, a list of GPU indices or \"0,1,2,3\", not " + Quoted(*text));
            gpu.gpus.clear();
            break;
          }
          if (std::find(gpu.gpus.begin(), gpu.gpus.end(), *n) != gpu.gpus.end()) {
            Error(ValuePos(*g), "GPU " + std::to_string(*n) + " is listed twice in 'gpus'");
          } else {
            gpu.gpus.push_back(static_cast<int>(*n));
          }
          if (comma == std::string_view::npos) break;
          rest = rest.substr(comma + 1);
        }
      } else if (g->value.IsSequence()) {
        for (auto it = g->value.begin(); it != g->value.end(); ++it) {
          YAML::Node item = *it;
          if (auto n = Integer(item, PosOf(item), "gpus", 0, 1023)) {
            if (std::find(gpu.gpus.begin(), gpu.gpus.end(), *n) != gpu.gpus.end()) {
              Error(PosOf(item), "GPU " + std::to_string(*n) + " is listed twice in 'gpus'");
              continue;
            }
            gpu.gpus.push_back(static_cast<int>(*n));
          }
        }
      } else {
        Error(ValuePos(*g), "'gpus' must be a list of GPU indices (e.g. [0, 1, 2, 3]) or all");
      }
    }
    ReadMaxUsed(f, gpu);
  }

  void ReadMaxUsed(const Fields& f, GpuSelection& gpu) {
    if (const Entry* m = f.Get("max_used")) gpu.max_used = SizeValue(*m).value_or(gpu.max_used);
  }

  void ReadService(const Entry& e, ServiceAction& a) {
    const YAML::Node& v = e.value;
    if (!v.IsMap()) {
      Error(ValuePos(e), "'service' must be a map with 'unit' and 'state' (or 'enabled')");
      return;
    }
    Fields f = ReadMap(v, kServiceKeys, "in 'service'");
    if (const Entry* u = f.Get("unit")) {
      a.unit = UnitName(*u).value_or("");
    } else {
      Error(PosOf(v), "missing required key 'unit' in 'service'");
    }
    if (const Entry* st = f.Get("state")) {
      std::optional<std::string> state = String(*st);
      if (state == "started" || state == "stopped" || state == "restarted") {
        a.state = *state;
      } else if (state) {
        Error(ValuePos(*st),
              "'state' must be started, stopped or restarted, not " + Quoted(*state));
      }
    }
    if (const Entry* en = f.Get("enabled")) a.enabled = Bool(*en);
    if (const Entry* x = f.Get("exec")) {
      if (std::optional<Command> command = CommandValue(*x)) a.exec = command->Argv();
      if (!a.exec.empty() && !a.exec[0].starts_with("/") &&
          a.exec[0].find('/') != std::string::npos)
        Error(ValuePos(*x), "'exec' program must be a name on PATH or an absolute path");
    }
    if (const Entry* x = f.Get("environment")) a.environment = EnvMap(*x);
    if (const Entry* x = f.Get("user")) a.user = NonEmptyString(*x).value_or("");
    if (const Entry* x = f.Get("working_directory"))
      a.working_directory = AbsolutePath(*x).value_or("");
    if (const Entry* x = f.Get("description")) a.description = String(*x).value_or("");
    if (const Entry* x = f.Get("stop_timeout"))
      a.stop_timeout = DurationValue(*x).value_or(a.stop_timeout);
    for (std::string_view key :
         {"environment", "user", "working_directory", "description", "stop_timeout"}) {
      if (const Entry* x = f.Get(key); x && !f.Get("exec"))
        Error(PosOf(x->key),
              Quoted(key) + " needs 'exec' (it goes into the unit file deployd writes)");
    }
    if (!f.Get("state") && !f.Get("enabled") && !f.Get("exec"))
      Error(PosOf(v), "'service' needs 'state', 'enabled' or 'exec' (what should change?)");
  }

  // systemd unit names: letters, digits, ":-_.\@", with a suffix; ".service" is assumed.
  std::optional<std::string> UnitName(const Entry& e) {
    std::optional<std::string> name = NonEmptyString(e);
    if (!name) return name;
    bool ok = name->size() <= 255 && std::all_of(name->begin(), name->end(), [](char c) {
                return IsAlpha(c) || IsDigit(c) ||
                       std::string_view(":-_.\\@").find(c) != std::string_view::npos;
              });
    if (!ok || name->starts_with(".") || name->starts_with("-")) {
      Error(ValuePos(e), "invalid unit name " + Quoted(*name) + " (expected e.g. kimi.service)");
      return std::nullopt;
    }
    if (name->find('.') == std::string::npos) *name += ".service";
    return name;
  }

  void ReadDownload(const Entry& e, DownloadAction& a) {
    const YAML::Node& v = e.value;
    if (!v.IsMap()) {
      Error(ValuePos(e), "'download' must be a map with 'repo' and 'to'");
      return;
    }
    Fields f = ReadMap(v, kDownloadKeys, "in 'download'");
    if (const Entry* r = f.Get("repo")) {
      std::optional<std::string> repo = NonEmptyString(*r);
      size_t slash = repo ? repo->find('/') : std::string::npos;
      bool ok = repo && slash != std::string::npos && slash > 0 && slash + 1 < repo->size() &&
                repo->find('/', slash + 1) == std::string::npos &&
                repo->find_first_of(" \t\n") == std::string::npos;
      if (repo && !ok) {
        Error(ValuePos(*r), "invalid repository " + Quoted(*repo) +
                                " (expected ORG/NAME, e.g. nvidia/Kimi-K2.5-NVFP4)");
      } else if (repo) {
        a.repo = *repo;
      }
    } else {
      Error(PosOf(v), "missing required key 'repo' in 'download'");
    }
    if (const Entry* t = f.Get("to")) {
      a.to = AbsolutePath(*t).value_or("");
    } else {
      Error(PosOf(v), "missing required key 'to' in 'download'");
    }
    if (const Entry* x = f.Get("revision")) a.revision = NonEmptyString(*x).value_or("");
    if (const Entry* x = f.Get("include"))
      for (auto& [p, pos] : StringList(*x)) a.include.push_back(p);
    if (const Entry* x = f.Get("exclude"))
      for (auto& [p, pos] : StringList(*x)) a.exclude.push_back(p);
    if (const Entry* x = f.Get("size")) a.size = SizeValue(*x);
  }

  void AddFailOnSet(std::string_view name, SourcePos pos, Watch& watch) {
    for (const NamedPattern& p : FailOnSet(name)) {
      FailPattern pattern;
      pattern.pattern = std::string(p.pattern);
      pattern.pos = pos;
      pattern.explanation = std::string(p.explanation);
      pattern.fatal = !p.retryable;
      pattern.set = std::string(name);
      watch.fail_on.push_back(std::move(pattern));
    }
  }

  // `has_retries`: the step may be fired again, which `on_stall: restart` needs.
  Watch ReadWatch(const Entry& e, bool has_retries) {
    Watch watch;
    if (e.value.IsNull()) return watch;
    if (!e.value.IsMap()) {
      Error(ValuePos(e), "'watch' must be a map");
      return watch;
    }
    Fields f = ReadMap(e.value, kWatchKeys, "in 'watch'");
    if (const Entry* progress = f.Get("progress")) watch.progress = ReadProgress(*progress);
    if (const Entry* on_stall = f.Get("on_stall")) {
      std::optional<std::string> value = String(*on_stall);
      if (value == "restart") {
        watch.on_stall = OnStall::kRestart;
      } else if (value && *value != "fail") {
        Error(ValuePos(*on_stall), "'on_stall' must be fail or restart");
      }
      if (!f.Get("progress")) {
        Error(PosOf(on_stall->key), "'on_stall' needs 'progress' (what would stall?)");
      } else if (watch.on_stall == OnStall::kRestart && !has_retries) {
        Error(ValuePos(*on_stall),
              "'on_stall: restart' needs 'retries' (how many times the action may be fired "
              "again)");
      }
    }
    ReadFailOn(f.Get("fail_on"), watch);
    return watch;
  }

  // {path, stall_after, every, total}; without `path` only progress lines in the output count.
  std::optional<ProgressSpec> ReadProgress(const Entry& e) {
    if (!e.value.IsMap()) {
      Error(ValuePos(e), "'progress' must be a map with 'stall_after' (and 'path' to watch)");
      return std::nullopt;
    }
    ProgressSpec spec;
    spec.pos = PosOf(e.value);
    Fields f = ReadMap(e.value, kProgressKeys, "in 'progress'");
    bool ok = true;
    if (const Entry* path = f.Get("path")) {
      std::optional<std::string> s = NonEmptyString(*path);
      ok = ok && s;
      spec.path = s.value_or("");
    }
    const Entry* stall_after = f.Get("stall_after");
    if (stall_after) {
      std::optional<Duration> d = DurationValue(*stall_after);
      ok = ok && d;
      if (d) spec.stall_after = *d;
    } else {
      Error(PosOf(e.value), "missing required key 'stall_after' in 'progress'");
      ok = false;
    }
    if (const Entry* every = f.Get("every")) {
      std::optional<Duration> parsed = DurationValue(*every);
      bool good = parsed.has_value();
      Duration d = parsed.value_or(Duration{0});
      if (good && d < kMinProgressEvery) {
        Error(ValuePos(*every), "'every' must be at least " + FormatDuration(kMinProgressEvery));
        good = false;
      } else if (good && stall_after && ok && d >= spec.stall_after) {
        Error(ValuePos(*every), "'every' (" + FormatDuration(d) +
                                    ") must be shorter than 'stall_after' (" +
                                    FormatDuration(spec.stall_after) + ")");
        good = false;
      }
      ok = ok && good;
      spec.every = d;
    } else if (stall_after && ok && spec.every >= spec.stall_after) {
      Error(ValuePos(*stall_after), "'stall_after' (" + FormatDuration(spec.stall_after) +
                                        ") must be longer than 'every' (" +
                                        FormatDuration(spec.every) + " by default)");
      ok = false;
    }
    if (const Entry* total = f.Get("total")) {
      std::optional<std::uint64_t> size = SizeValue(*total);
      if (size && !f.Get("path")) {
        Error(PosOf(total->key), "'total' needs 'path' (the bytes it is compared with)");
        size.reset();
      }
      ok = ok && size;
      spec.total = size;
    }
    if (!ok) return std::nullopt;
    return spec;
  }

  void ReadFailOn(const Entry* fail_on, Watch& watch) {
    if (!fail_on) return;
    // A bare set name ("vllm") stands for its patterns: as a regex it would match any line
    // that mentions the program.
    auto add = [&](const YAML::Node& node, SourcePos pos) {
      if (!FailOnSet(node.Scalar()).empty()) {
        AddFailOnSet(node.Scalar(), pos, watch);
      } else if (std::optional<std::string> re = Regex(node, pos, "fail_on")) {
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
          Error(PosOf(pattern), "'fail_on' must be a string or a list of strings");
        }
      }
    } else {
      Error(ValuePos(*fail_on), "'fail_on' must be a string or a list of strings");
    }
  }

  // --- the document ---

  // Values are literal (no ${} inside vars); --var overrides replace them.
  void ReadVars(const Entry* e, Plan& plan) {
    if (e && !e->value.IsNull() && !e->value.IsMap()) {
      Error(ValuePos(*e), "'vars' must be a map of names to values");
      vars_broken_ = true;
      return;
    }
    if (e && e->value.IsMap()) {
      for (const Entry& var : Entries(e->value)) {
        auto overridden = overrides_.find(var.name);
        if (!IsIdentifier(var.name)) {
          Error(PosOf(var.key), "invalid variable name " + Quoted(var.name) +
                                    " (use letters, digits and '_', not starting with a digit)");
          continue;
        }
        std::optional<std::string> value;
        if (var.value.IsScalar()) {
          value = var.value.Scalar();
        } else if (!var.value.IsNull()) {
          Error(ValuePos(var),
                "variable " + Quoted(var.name) + " must be a string, a number or a boolean");
        } else if (overridden == overrides_.end()) {
          Error(PosOf(var.key), "variable " + Quoted(var.name) + " has no value (pass --var " +
                                    var.name + "=VALUE)");
        }
        if (overridden != overrides_.end()) value = overridden->second;
        vars_[var.name] = value;
        if (value) plan.vars[var.name] = *value;
      }
    }
    for (const auto& [name, value] : overrides_) {
      if (!vars_.contains(name))
        Error({}, "--var " + Quoted(name) + ": the plan declares no variable " + Quoted(name));
    }
  }

  std::optional<Plan> ReadDocument() {
    std::vector<YAML::Node> docs;
    try {
      docs = YAML::LoadAll(std::string(text_));
    } catch (const YAML::DeepRecursion& e) {
      Error(PosOf(e.mark), "invalid YAML: nesting is too deep");
      return std::nullopt;
    } catch (const YAML::Exception& e) {
      Error(PosOf(e.mark), "invalid YAML: " + e.msg);
      return std::nullopt;
    }
    if (docs.empty() || (docs.size() == 1 && docs[0].IsNull())) {
      Error({}, "the plan is empty (expected a map with 'version', 'name' and 'steps')");
      return std::nullopt;
    }
    if (docs.size() > 1) Error(PosOf(docs[1]), "the plan must be a single YAML document");
    const YAML::Node& root = docs[0];
    if (!root.IsMap()) {
      Error(PosOf(root), "the plan must be a map with 'version', 'name' and 'steps'");
      return std::nullopt;
    }
    Fields top = ReadMap(root, kTopKeys, "");
    Plan plan;
    // Variables first: every other string may use them.
    ReadVars(top.Get("vars"), plan);
    if (const Entry* e = top.Get("version")) {
      if (!e->value.IsScalar()) {
        Error(ValuePos(*e), "'version' must be the integer 1");
      } else if (std::optional<std::string> v = Substitute(e->value, ValuePos(*e));
                 v && ParseInteger(*v) != 1) {
        Error(ValuePos(*e), "unsupported plan version " + Quoted(*v) + " (expected 1)");
      }
    } else {
      Error(PosOf(root), "missing required key 'version'");
    }
    if (const Entry* e = top.Get("name")) {
      std::optional<std::string> name = String(*e);
      if (name && !IsPlanName(*name)) {
        Error(ValuePos(*e),
              "invalid plan name " + Quoted(*name) + " (use letters, digits, '.', '_' and '-')");
      } else if (name) {
        plan.name = *name;
      }
    } else {
      Error(PosOf(root), "missing required key 'name'");
    }
    if (const Entry* e = top.Get("description")) plan.description = String(*e).value_or("");
    if (const Entry* e = top.Get("secrets")) ReadSecrets(*e, plan);
    if (const Entry* e = top.Get("preflight")) plan.preflight = ReadChecks(*e);
    // Document order, so that a duplicate id is reported where it occurs second.
    for (const Entry& e : top.entries) {
      if (e.name == "steps") plan.steps = ReadSteps(e, false);
      if (e.name == "on_failure") plan.on_failure = ReadSteps(e, true);
    }
    if (!top.Get("steps")) Error(PosOf(root), "missing required key 'steps'");
    AddImpliedPreflight(plan);
    return plan;
  }

  // secrets: {HF_TOKEN: {file: /etc/deployd/hf-token}, OTHER: {env: OTHER}}
  void ReadSecrets(const Entry& e, Plan& plan) {
    if (e.value.IsNull()) return;
    if (!e.value.IsMap()) {
      Error(ValuePos(e), "'secrets' must be a map of names to {file: PATH} or {env: NAME}");
      return;
    }
    for (const Entry& entry : Entries(e.value)) {
      if (!IsIdentifier(entry.name)) {
        Error(PosOf(entry.key), "invalid secret name " + Quoted(entry.name) +
                                    " (it becomes an environment variable: letters, digits, '_')");
        continue;
      }
      SecretSource source;
      source.name = entry.name;
      source.pos = PosOf(entry.key);
      if (!entry.value.IsMap()) {
        Error(ValuePos(entry), "secret " + Quoted(entry.name) +
                                   " must be {file: PATH} or {env: NAME} (its value is never "
                                   "written in a plan)");
        continue;
      }
      Fields f = ReadMap(entry.value, kSecretKeys, "in secret " + Quoted(entry.name));
      const Entry* file = f.Get("file");
      const Entry* env = f.Get("env");
      if (file && env) {
        Error(PosOf(env->key), "secret " + Quoted(entry.name) + " takes 'file' or 'env', not both");
      } else if (file) {
        source.file = AbsolutePath(*file).value_or("");
      } else if (env) {
        std::optional<std::string> name = NonEmptyString(*env);
        if (name && !IsIdentifier(*name)) {
          Error(ValuePos(*env), "invalid environment variable name " + Quoted(*name));
        } else if (name) {
          source.env = *name;
        }
      } else {
        Error(PosOf(entry.value), "secret " + Quoted(entry.name) + " needs 'file' or 'env'");
      }
      secrets_.insert(source.name);
      plan.secrets.push_back(std::move(source));
    }
  }

  // What a built-in action needs before anything is changed: its tool on PATH, and for a
  // download of known size the space for it. Checked in preflight, so a missing `hf` fails the
  // run before the old server is stopped.
  void AddImpliedPreflight(Plan& plan) {
    auto has_command = [&](const std::string& name) {
      return std::any_of(plan.preflight.begin(), plan.preflight.end(), [&](const Check& c) {
        return c.kind == CheckKind::kCommand && c.name == name;
      });
    };
    for (const auto* list : {&plan.steps, &plan.on_failure}) {
      for (const Step& step : *list) {
        Check check;
        check.kind = CheckKind::kCommand;
        check.pos = step.pos;
        if (step.kind == ActionKind::kService && !has_command("systemctl")) {
          check.name = "systemctl";
          plan.preflight.push_back(check);
        }
        if (step.kind != ActionKind::kDownload) continue;
        if (!has_command("hf")) {
          check.name = "hf";
          check.alternatives = {"huggingface-cli"};
          plan.preflight.push_back(check);
        }
        bool space_checked =
            std::any_of(plan.preflight.begin(), plan.preflight.end(), [&](const Check& c) {
              return c.kind == CheckKind::kDiskFree && c.path == step.download.to;
            });
        if (step.download.size && !space_checked) {
          Check space;
          space.kind = CheckKind::kDiskFree;
          space.pos = step.pos;
          space.path = step.download.to;
          space.at_least = *step.download.size;
          space.credit_existing = true;
          plan.preflight.push_back(space);
        }
      }
    }
  }

  std::string_view text_;
  std::string file_;
  const std::map<std::string, std::string>& overrides_;
  std::vector<Diagnostic> errors_;
  // Declared variables; nullopt for one without a usable value (already reported).
  std::map<std::string, std::optional<std::string>> vars_;
  bool vars_broken_ = false;
  std::map<std::string, SourcePos> step_ids_;
  std::set<std::string> secrets_;  // names the plan's `secrets:` defines
};

}  // namespace

ParseResult ParsePlan(std::string_view text, std::string_view file_name,
                      const std::map<std::string, std::string>& overrides) {
  try {
    return PlanReader(text, file_name, overrides).Read();
  } catch (const std::exception& e) {
    // Nothing above should throw; if yaml-cpp does anyway, the plan is rejected, not the daemon.
    ParseResult result;
    result.errors.push_back(
        Diagnostic{std::string(file_name), 0, 0, std::string("internal error: ") + e.what(), ""});
    return result;
  }
}

}  // namespace deployd
