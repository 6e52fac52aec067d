// FieldReader: the generic half of reading an operator's YAML — the entries of a map with
// unknown and duplicate keys reported ("did you mean"), typed scalars (strings, booleans,
// integers, durations, sizes, regexes, commands, environment maps, paths) with ${var}
// substitution, and the sink that collects every problem with its position and source line. The
// plan grammars (check_grammar.h, step_grammar.h, …) say which keys mean what; this class knows
// nothing of plans.
//
// A reader returns nullopt (or an empty value) after reporting why; callers keep going, so that
// the user sees every problem in one go. One FieldReader per document; not thread-safe.
//
// yaml-cpp 0.7 quirks handled here (notes/build-facts.md §5): marks are 0-based, duplicate map
// keys are accepted silently, and an empty value (`key:`) carries the mark of whatever follows it.
#ifndef DEPLOYD_PLAN_FIELD_READER_H_
#define DEPLOYD_PLAN_FIELD_READER_H_

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "deployd/plan.h"
#include "plan/diagnostic.h"
#include "plan/plan_limits.h"

namespace deployd {

using Keys = std::span<const std::string_view>;

// One entry (key: value) of a map whose keys have been checked (strings, no duplicates, known).
struct Field {
  std::string name;
  YAML::Node key;
  YAML::Node value;
};

// The known entries of one map, in document order.
struct Fields {
  std::vector<Field> entries;
  const Field* Get(std::string_view name) const;
};

// "'name'": how messages quote what the user wrote, cut to kMaxQuotedValueBytes.
std::string Quoted(std::string_view s);

// yaml-cpp's 0-based mark as a 1-based position; a null mark has none.
SourcePos PosOf(const YAML::Mark& mark);
SourcePos PosOf(const YAML::Node& node);
// An empty value has the mark of whatever follows it, so a null value points at its key.
SourcePos ValuePos(const Field& e);

class FieldReader {
 public:
  // `text` must outlive the reader; `file` names it in diagnostics.
  FieldReader(std::string_view text, std::string_view file);

  // --- diagnostics ---

  // Past kMaxDiagnostics problems, a problem is only counted.
  void Error(SourcePos pos, std::string message);
  // kMaxDiagnostics have been reported: what only improves a message (a suggestion) is skipped.
  bool Full() const { return errors_.size() >= kMaxDiagnostics; }
  // Every problem reported, ordered by position (those without one first; ties keep the order
  // they were reported in): readers visit keys in the order they need them, the user reads the
  // list top to bottom. When there were more than kMaxDiagnostics, the last says how many more.
  std::vector<Diagnostic> TakeDiagnostics();

  // --- variables ---

  // A declared variable; nullopt for one without a usable value (reported at its declaration).
  void DefineVariable(const std::string& name, std::optional<std::string> value);
  bool DefinesVariable(const std::string& name) const { return vars_.contains(name); }
  // `vars:` itself is broken: an undefined variable is then not reported at each use.
  void SetVariablesBroken() { vars_broken_ = true; }

  // --- maps ---

  // Keys must be strings and unique; yaml-cpp accepts duplicates silently and lookups would see
  // only the first, so the second is reported and dropped.
  std::vector<Field> Entries(const YAML::Node& map);
  // Entries() with keys outside `known` reported. `context` ends the unknown-key message ("in
  // step 'build'"); empty means the top level.
  Fields ReadMap(const YAML::Node& map, Keys known, std::string_view context);

  // --- scalars ---

  // ${name} → the variable's value; $${ → a literal ${; any other $ stays as it is.
  std::optional<std::string> Substitute(const YAML::Node& scalar, SourcePos pos);
  // Any scalar reads as a string (`description: 1.0` is the text "1.0"); null and collections
  // do not.
  std::optional<std::string> String(const YAML::Node& node, SourcePos pos, std::string_view what);
  std::optional<std::string> String(const Field& e);
  std::optional<std::string> NonEmptyString(const Field& e);
  // NonEmptyString() that starts with '/'.
  std::optional<std::string> AbsolutePath(const Field& e);
  std::optional<bool> Bool(const Field& e);
  std::optional<std::int64_t> Integer(const YAML::Node& node, SourcePos pos, std::string_view what,
                                      std::int64_t min, std::int64_t max);
  std::optional<std::int64_t> Integer(const Field& e, std::int64_t min, std::int64_t max);
  std::optional<Duration> DurationValue(const Field& e);
  std::optional<std::uint64_t> SizeValue(const Field& e);
  // The pattern is kept as written, "(?i)" included; compiling it here only proves it compiles.
  // The size of its program (util/pattern.h) is added to `instructions` when given.
  std::optional<std::string> Regex(const YAML::Node& node, SourcePos pos, std::string_view what,
                                   std::int64_t* instructions = nullptr);

  // --- composite values ---

  // A string runs through the shell; a list is an argv.
  std::optional<Command> CommandValue(const Field& e);
  std::map<std::string, std::string> EnvMap(const Field& e);
  // A scalar or a list of scalars, each with where it was written.
  std::vector<std::pair<std::string, SourcePos>> StringList(const Field& e);

 private:
  std::string_view SourceLine(int line);
  // The text of a number (an integer, a duration, a size), or nullopt (reported).
  std::optional<std::string> NumberText(const YAML::Node& node, SourcePos pos,
                                        std::string_view what);

  std::string_view text_;
  std::string file_;
  std::vector<std::size_t> line_starts_;  // built at the first diagnostic
  std::vector<Diagnostic> errors_;
  std::size_t errors_not_kept_ = 0;
  std::map<std::string, std::optional<std::string>> vars_;
  bool vars_broken_ = false;
};

}  // namespace deployd

#endif  // DEPLOYD_PLAN_FIELD_READER_H_
