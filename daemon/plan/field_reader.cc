#include "plan/field_reader.h"

#include <algorithm>
#include <array>
#include <unordered_set>

#include "plan/name_rules.h"
#include "util/pattern.h"
#include "util/units.h"
#include "util/utf8_text.h"

namespace deployd {
namespace {

constexpr std::string_view kDurationHint = "(expected e.g. 500ms, 15s, 10m, 8h)";
constexpr std::string_view kSizeHint = "(expected e.g. 512MiB, 600GiB, 1GB)";

// Optimal string alignment distance: an adjacent transposition ("stpes") counts as one edit.
// REQUIRES: both are at most kMaxSuggestedNameBytes + 2 bytes long.
int EditDistance(std::string_view a, std::string_view b) {
  constexpr std::size_t kRow = kMaxSuggestedNameBytes + 3;
  std::array<int, kRow> before{}, previous{}, current{};
  for (std::size_t j = 0; j <= b.size(); ++j) previous[j] = static_cast<int>(j);
  for (std::size_t i = 1; i <= a.size(); ++i) {
    current[0] = static_cast<int>(i);
    for (std::size_t j = 1; j <= b.size(); ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        current[j] = std::min(current[j], before[j - 2] + 1);
    }
    before = previous;
    previous = current;
  }
  return previous[b.size()];
}

// A lower bound of EditDistance(a, b), in time linear in their lengths: an edit adds or takes
// away at most one character of each.
int BagDistance(std::string_view a, std::string_view b) {
  std::array<int, 256> count{};
  for (char c : a) ++count[static_cast<unsigned char>(c)];
  for (char c : b) --count[static_cast<unsigned char>(c)];
  int extra = 0;
  int missing = 0;
  for (std::string_view s : {a, b}) {
    for (char c : s) {
      int& n = count[static_cast<unsigned char>(c)];
      (n > 0 ? extra : missing) += n > 0 ? n : -n;
      n = 0;
    }
  }
  return std::max(extra, missing);
}

// " (did you mean 'timeout'?)" when one candidate is within two edits; the closest wins, the
// first listed on a tie. A two-letter word is two edits from every other, so the distance must
// also be less than the word's length. Bounded whatever the plan: long words get no suggestion,
// and only the first kMaxSuggestionCandidates candidates that could be close (by length and by
// the characters they hold) are compared.
template <typename Range, typename NameOf>
std::string DidYouMean(std::string_view word, const Range& candidates, NameOf name_of) {
  if (word.size() > kMaxSuggestedNameBytes) return "";
  std::string_view best;
  int best_distance = 3;
  std::size_t compared = 0;
  for (const auto& c : candidates) {
    std::string_view candidate = name_of(c);
    // Two edits change the length by two at most.
    if (candidate.size() + 2 < word.size() || candidate.size() > word.size() + 2) continue;
    if (BagDistance(word, candidate) > 2) continue;
    if (++compared > kMaxSuggestionCandidates) break;
    int distance = EditDistance(word, candidate);
    if (distance < best_distance && distance < static_cast<int>(word.size())) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best.empty() ? "" : " (did you mean " + Quoted(best) + "?)";
}

// A source line as it can be shown: the line of an encoding error is not UTF-8, and that of a
// control character holds one; each such byte becomes U+FFFD (one column, as the caret counts).
std::string Printable(std::string_view line) {
  std::string out;
  for (char c : ValidUtf8(line)) {
    auto b = static_cast<unsigned char>(c);
    if ((b < 0x20 && c != '\t') || b == 0x7F) {
      out += "\xEF\xBF\xBD";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

const Field* Fields::Get(std::string_view name) const {
  for (const Field& e : entries) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

std::string Quoted(std::string_view s) {
  if (s.size() <= kMaxQuotedValueBytes) return "'" + std::string(s) + "'";
  return "'" + ValidUtf8(QuoteAround(s, 0, kMaxQuotedValueBytes)) + "'";
}

SourcePos PosOf(const YAML::Mark& mark) {
  if (mark.is_null()) return {};
  return {mark.line + 1, mark.column + 1};
}
SourcePos PosOf(const YAML::Node& node) { return PosOf(node.Mark()); }
SourcePos ValuePos(const Field& e) { return e.value.IsNull() ? PosOf(e.key) : PosOf(e.value); }

FieldReader::FieldReader(std::string_view text, std::string_view file) : text_(text), file_(file) {}

// --- diagnostics ---

void FieldReader::Error(SourcePos pos, std::string message) {
  if (Full()) {
    ++errors_not_kept_;
    return;
  }
  Diagnostic d;
  d.file = file_;
  d.line = pos.line;
  d.column = pos.column;
  d.message = std::move(message);
  // A one-line plan can hold a megabyte: a long line is quoted as a window around the column.
  std::string_view source = SourceLine(pos.line);
  std::size_t begin = 0;
  std::size_t at = pos.column > 0 ? static_cast<std::size_t>(pos.column - 1) : 0;
  d.source_line = Printable(QuoteAround(source, at, kMaxQuotedSourceBytes, &begin));
  if (begin > 0) d.caret = static_cast<int>(at - begin + std::string_view("…").size()) + 1;
  errors_.push_back(std::move(d));
}

std::vector<Diagnostic> FieldReader::TakeDiagnostics() {
  std::stable_sort(errors_.begin(), errors_.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::pair(a.line, a.column) < std::pair(b.line, b.column);
  });
  if (errors_not_kept_ > 0) {
    errors_.push_back({file_, 0, 0,
                       "and " + std::to_string(errors_not_kept_) + " more errors (the first " +
                           std::to_string(kMaxDiagnostics) + " are shown)",
                       "", 0});
  }
  return std::move(errors_);
}

std::string_view FieldReader::SourceLine(int line) {
  if (line <= 0) return "";
  if (line_starts_.empty()) {
    line_starts_.push_back(0);
    for (std::size_t i = 0; i < text_.size(); ++i)
      if (text_[i] == '\n') line_starts_.push_back(i + 1);
  }
  if (static_cast<std::size_t>(line) > line_starts_.size()) return "";
  std::string_view rest = text_.substr(line_starts_[line - 1]);
  std::string_view source = rest.substr(0, rest.find('\n'));
  if (source.ends_with('\r')) source.remove_suffix(1);
  return source;
}

// --- variables ---

void FieldReader::DefineVariable(const std::string& name, std::optional<std::string> value) {
  vars_[name] = std::move(value);
}

// --- maps ---

std::vector<Field> FieldReader::Entries(const YAML::Node& map) {
  std::vector<Field> entries;
  std::unordered_set<std::string> names;
  for (auto it = map.begin(); it != map.end(); ++it) {
    Field e{"", it->first, it->second};
    if (!e.key.IsScalar()) {
      Error(PosOf(e.key), "keys must be strings");
      continue;
    }
    e.name = e.key.Scalar();
    if (!names.insert(e.name).second) {
      Error(PosOf(e.key), "duplicate key " + Quoted(e.name));
      continue;
    }
    entries.push_back(std::move(e));
  }
  return entries;
}

Fields FieldReader::ReadMap(const YAML::Node& map, Keys known, std::string_view context) {
  Fields fields;
  for (Field& e : Entries(map)) {
    if (std::find(known.begin(), known.end(), e.name) == known.end()) {
      std::string what = context.empty()
                             ? "unknown top-level key " + Quoted(e.name)
                             : "unknown key " + Quoted(e.name) + " " + std::string(context);
      auto same = [](std::string_view name) { return name; };
      Error(PosOf(e.key), what + (Full() ? "" : DidYouMean(e.name, known, same)));
    } else {
      fields.entries.push_back(std::move(e));
    }
  }
  return fields;
}

// --- scalars ---

std::optional<std::string> FieldReader::Substitute(const YAML::Node& scalar, SourcePos pos) {
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
        Error(pos, "invalid variable reference '${" + name + "}' (write '$${' for a literal '${')");
        ok = false;
        continue;
      }
      auto var = vars_.find(name);
      if (var == vars_.end()) {
        // When `vars:` itself is broken, every use would be noise on top of that error.
        if (!vars_broken_) {
          auto name_of = [](const auto& var) -> std::string_view { return var.first; };
          Error(pos, "undefined variable " + Quoted(name) +
                         (Full() ? "" : DidYouMean(name, vars_, name_of)));
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

std::optional<std::string> FieldReader::String(const YAML::Node& node, SourcePos pos,
                                               std::string_view what) {
  if (!node.IsScalar()) {
    Error(pos, Quoted(what) + " must be a string");
    return std::nullopt;
  }
  return Substitute(node, pos);
}

std::optional<std::string> FieldReader::String(const Field& e) {
  return String(e.value, ValuePos(e), e.name);
}

std::optional<std::string> FieldReader::NonEmptyString(const Field& e) {
  std::optional<std::string> s = String(e);
  if (s && s->empty()) {
    Error(ValuePos(e), Quoted(e.name) + " must not be empty");
    return std::nullopt;
  }
  return s;
}

std::optional<std::string> FieldReader::AbsolutePath(const Field& e) {
  std::optional<std::string> path = NonEmptyString(e);
  if (path && !path->starts_with("/")) {
    Error(ValuePos(e), Quoted(e.name) + " must be an absolute path, not " + Quoted(*path));
    return std::nullopt;
  }
  return path;
}

// Typed values are read from the text after substitution, so `port: ${port}` works whether or
// not the YAML scalar was quoted.
std::optional<bool> FieldReader::Bool(const Field& e) {
  std::optional<std::string> s;
  if (e.value.IsScalar()) s = Substitute(e.value, ValuePos(e));
  if (s == "true" || s == "True" || s == "TRUE") return true;
  if (s == "false" || s == "False" || s == "FALSE") return false;
  if (s || !e.value.IsScalar()) Error(ValuePos(e), Quoted(e.name) + " must be true or false");
  return std::nullopt;
}

std::optional<std::string> FieldReader::NumberText(const YAML::Node& node, SourcePos pos,
                                                   std::string_view what) {
  std::optional<std::string> s = Substitute(node, pos);
  if (s && s->size() > kMaxNumberChars) {
    Error(pos, Quoted(what) + " is too long for a number (more than " +
                   std::to_string(kMaxNumberChars) + " characters)");
    return std::nullopt;
  }
  return s;
}

std::optional<std::int64_t> FieldReader::Integer(const YAML::Node& node, SourcePos pos,
                                                 std::string_view what, std::int64_t min,
                                                 std::int64_t max) {
  if (!node.IsScalar()) {
    Error(pos, Quoted(what) + " must be an integer");
    return std::nullopt;
  }
  std::optional<std::string> s = NumberText(node, pos, what);
  if (!s) return std::nullopt;
  std::optional<std::int64_t> value = ParseInteger(*s);
  if (!value) {
    Error(pos, Quoted(what) + " must be an integer");
  } else if (*value < min || *value > max) {
    Error(pos,
          Quoted(what) + " must be between " + std::to_string(min) + " and " + std::to_string(max));
    return std::nullopt;
  }
  return value;
}

std::optional<std::int64_t> FieldReader::Integer(const Field& e, std::int64_t min,
                                                 std::int64_t max) {
  return Integer(e.value, ValuePos(e), e.name, min, max);
}

std::optional<Duration> FieldReader::DurationValue(const Field& e) {
  if (!e.value.IsScalar()) {
    Error(ValuePos(e), Quoted(e.name) + " must be a duration " + std::string(kDurationHint));
    return std::nullopt;
  }
  std::optional<std::string> s = NumberText(e.value, ValuePos(e), e.name);
  if (!s) return std::nullopt;
  std::optional<Duration> d = ParseDuration(*s);
  if (!d) {
    Error(ValuePos(e), "invalid duration " + Quoted(*s) + " " + std::string(kDurationHint));
  } else if (*d > kMaxDuration) {
    Error(ValuePos(e), Quoted(e.name) + " must be at most " +
                           std::to_string(kMaxDuration / std::chrono::hours(24)) + "d, not " +
                           Quoted(*s));
    return std::nullopt;
  }
  return d;
}

std::optional<std::uint64_t> FieldReader::SizeValue(const Field& e) {
  if (!e.value.IsScalar()) {
    Error(ValuePos(e), Quoted(e.name) + " must be a size " + std::string(kSizeHint));
    return std::nullopt;
  }
  std::optional<std::string> s = NumberText(e.value, ValuePos(e), e.name);
  if (!s) return std::nullopt;
  std::optional<std::uint64_t> size = ParseSize(*s);
  if (!size) Error(ValuePos(e), "invalid size " + Quoted(*s) + " " + std::string(kSizeHint));
  return size;
}

std::optional<std::string> FieldReader::Regex(const YAML::Node& node, SourcePos pos,
                                              std::string_view what, std::int64_t* instructions) {
  std::optional<std::string> pattern = String(node, pos, what);
  if (!pattern) return std::nullopt;
  std::string_view body = *pattern;
  if (body.starts_with("(?i)")) body.remove_prefix(4);
  if (body.empty()) {
    Error(pos, Quoted(what) + " must not be an empty pattern");
    return std::nullopt;
  }
  CheckedPattern checked = CheckPattern(*pattern);
  if (!checked.problem.empty()) {
    Error(pos, "invalid regex " + Quoted(*pattern) + ": " + checked.problem);
    return std::nullopt;
  }
  if (instructions) *instructions += checked.instructions;
  return pattern;
}

// --- composite values ---

std::optional<Command> FieldReader::CommandValue(const Field& e) {
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

std::map<std::string, std::string> FieldReader::EnvMap(const Field& e) {
  std::map<std::string, std::string> env;
  if (e.value.IsNull()) return env;
  if (!e.value.IsMap()) {
    Error(ValuePos(e), Quoted(e.name) + " must be a map of names to strings");
    return env;
  }
  for (const Field& var : Entries(e.value)) {
    if (!IsIdentifier(var.name)) {
      Error(PosOf(var.key), "invalid environment variable name " + Quoted(var.name));
      continue;
    }
    if (!var.value.IsScalar()) {
      Error(ValuePos(var), Quoted(e.name) + " value for " + Quoted(var.name) + " must be a string");
      continue;
    }
    if (std::optional<std::string> value = Substitute(var.value, ValuePos(var)))
      env[var.name] = *value;
  }
  return env;
}

std::vector<std::pair<std::string, SourcePos>> FieldReader::StringList(const Field& e) {
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

}  // namespace deployd
