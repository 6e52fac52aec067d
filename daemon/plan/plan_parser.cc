// PlanParser: a recursive descent over the node tree that yaml-cpp builds. yaml-cpp only checks
// YAML syntax; every rule of plan format v1 is checked here and in the grammars this file reads
// the document with (check_grammar.h, step_grammar.h, …), and every problem goes to one sink
// (field_reader.h) so that the user sees all of them in one go (like a compiler), not one per
// attempt.
//
// This file holds the document's own grammar: the top-level map, `vars:` (with the --var
// overrides) and `secrets:`.
#include "plan/plan_parser.h"

#include <yaml-cpp/yaml.h>

#include <array>
#include <exception>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "plan/check_grammar.h"
#include "plan/field_reader.h"
#include "plan/name_rules.h"
#include "plan/plan_defaults.h"
#include "plan/plan_document.h"
#include "plan/step_grammar.h"
#include "util/units.h"
#include "util/utf8_text.h"

namespace deployd {
namespace {

constexpr std::array<std::string_view, 9> kTopKeys = {"version",   "name",  "description",
                                                      "lock",      "vars",  "secrets",
                                                      "preflight", "steps", "on_failure"};
constexpr std::array<std::string_view, 2> kSecretKeys = {"file", "env"};

using Overrides = std::map<std::string, std::string>;

// One declared variable; --var replaces its value.
void ReadVar(FieldReader& in, const Field& var, const Overrides& overrides, Plan& plan) {
  auto overridden = overrides.find(var.name);
  if (!IsIdentifier(var.name)) {
    in.Error(PosOf(var.key), "invalid variable name " + Quoted(var.name) +
                                 " (use letters, digits and '_', not starting with a digit)");
    return;
  }
  std::optional<std::string> value;
  if (var.value.IsScalar()) {
    value = var.value.Scalar();
  } else if (!var.value.IsNull()) {
    in.Error(ValuePos(var),
             "variable " + Quoted(var.name) + " must be a string, a number or a boolean");
  } else if (overridden == overrides.end()) {
    in.Error(PosOf(var.key),
             "variable " + Quoted(var.name) + " has no value (pass --var " + var.name + "=VALUE)");
  }
  if (overridden != overrides.end()) value = overridden->second;
  in.DefineVariable(var.name, value);
  if (value) plan.vars[var.name] = *value;
}

// Values are literal (no ${} inside vars); --var overrides replace them.
void ReadVars(FieldReader& in, const Field* e, const Overrides& overrides, Plan& plan) {
  if (e && !e->value.IsNull() && !e->value.IsMap()) {
    in.Error(ValuePos(*e), "'vars' must be a map of names to values");
    in.SetVariablesBroken();
    return;
  }
  if (e && e->value.IsMap()) {
    for (const Field& var : in.Entries(e->value)) ReadVar(in, var, overrides, plan);
  }
  for (const auto& [name, value] : overrides) {
    if (!in.DefinesVariable(name)) {
      in.Error({}, "--var " + Quoted(name) + ": the plan declares no variable " + Quoted(name));
    } else if (FirstInvalidUtf8(value) != std::string::npos) {
      // It could not reach deployd: requests are JSON, which is UTF-8.
      in.Error({}, "--var " + Quoted(name) + ": the value is not valid UTF-8");
    }
  }
}

// {file: PATH} or {env: NAME} of the secret `entry` names.
void ReadSecretSource(FieldReader& in, const Field& entry, SecretSource& source) {
  Fields f = in.ReadMap(entry.value, kSecretKeys, "in secret " + Quoted(entry.name));
  const Field* file = f.Get("file");
  const Field* env = f.Get("env");
  if (file && env) {
    in.Error(PosOf(env->key), "secret " + Quoted(entry.name) + " takes 'file' or 'env', not both");
  } else if (file) {
    source.file = in.AbsolutePath(*file).value_or("");
  } else if (env) {
    std::optional<std::string> name = in.NonEmptyString(*env);
    if (name && !IsIdentifier(*name)) {
      in.Error(ValuePos(*env), "invalid environment variable name " + Quoted(*name));
    } else if (name) {
      source.env = *name;
    }
  } else {
    in.Error(PosOf(entry.value), "secret " + Quoted(entry.name) + " needs 'file' or 'env'");
  }
}

// secrets: {HF_TOKEN: {file: /etc/deployd/hf-token}, OTHER: {env: OTHER}}
void ReadSecrets(FieldReader& in, const Field& e, Plan& plan) {
  if (e.value.IsNull()) return;
  if (!e.value.IsMap()) {
    in.Error(ValuePos(e), "'secrets' must be a map of names to {file: PATH} or {env: NAME}");
    return;
  }
  for (const Field& entry : in.Entries(e.value)) {
    if (!IsIdentifier(entry.name)) {
      in.Error(PosOf(entry.key), "invalid secret name " + Quoted(entry.name) +
                                     " (it becomes an environment variable: letters, digits, '_')");
      continue;
    }
    SecretSource source;
    source.name = entry.name;
    source.pos = PosOf(entry.key);
    if (!entry.value.IsMap()) {
      in.Error(ValuePos(entry), "secret " + Quoted(entry.name) +
                                    " must be {file: PATH} or {env: NAME} (its value is never "
                                    "written in a plan)");
      continue;
    }
    ReadSecretSource(in, entry, source);
    plan.secrets.push_back(std::move(source));
  }
}

void ReadVersion(FieldReader& in, const Fields& top, const YAML::Node& root) {
  const Field* e = top.Get("version");
  if (!e) {
    in.Error(PosOf(root), "missing required key 'version'");
  } else if (!e->value.IsScalar()) {
    in.Error(ValuePos(*e), "'version' must be the integer 1");
  } else if (e->value.Tag() == "!") {  // quoted
    in.Error(ValuePos(*e), "'version' must be the integer 1, not a string");
  } else if (std::optional<std::string> v = in.Substitute(e->value, ValuePos(*e));
             v && ParseInteger(*v) != 1) {
    in.Error(ValuePos(*e), "unsupported plan version " + Quoted(*v) + " (expected 1)");
  }
}

void ReadName(FieldReader& in, const Fields& top, const YAML::Node& root, Plan& plan) {
  const Field* e = top.Get("name");
  if (!e) {
    in.Error(PosOf(root), "missing required key 'name'");
    return;
  }
  std::optional<std::string> name = in.String(*e);
  if (name && !IsPlanName(*name)) {
    in.Error(ValuePos(*e),
             "invalid plan name " + Quoted(*name) + " (use letters, digits, '.', '_' and '-')");
  } else if (name) {
    plan.name = *name;
  }
}

std::optional<Plan> ReadDocument(FieldReader& in, std::string_view text,
                                 const Overrides& overrides) {
  std::optional<YAML::Node> root = LoadPlanDocument(in, text);
  if (!root) return std::nullopt;
  Fields top = in.ReadMap(*root, kTopKeys, "");
  Plan plan;
  // Variables first: every other string may use them.
  ReadVars(in, top.Get("vars"), overrides, plan);
  ReadVersion(in, top, *root);
  ReadName(in, top, *root, plan);
  if (const Field* e = top.Get("description")) plan.description = in.String(*e).value_or("");
  plan.lock = plan.name;
  if (const Field* e = top.Get("lock")) {
    std::optional<std::string> lock = in.String(*e);
    if (lock && !IsPlanName(*lock)) {
      in.Error(ValuePos(*e),
               "invalid lock name " + Quoted(*lock) + " (use letters, digits, '.', '_' and '-')");
    } else if (lock) {
      plan.lock = *lock;
    }
  }
  if (const Field* e = top.Get("secrets")) ReadSecrets(in, *e, plan);
  if (const Field* e = top.Get("preflight")) plan.preflight = ReadChecks(in, *e);
  std::set<std::string> secret_names;
  for (const SecretSource& s : plan.secrets) secret_names.insert(s.name);
  StepReader steps(in, secret_names);
  // Document order, so that a duplicate id is reported where it occurs second.
  for (const Field& e : top.entries) {
    if (e.name == "steps") plan.steps = steps.ReadSteps(e, false);
    if (e.name == "on_failure") plan.on_failure = steps.ReadSteps(e, true);
  }
  if (!top.Get("steps")) in.Error(PosOf(*root), "missing required key 'steps'");
  AddImpliedPreflight(plan);
  return plan;
}

}  // namespace

ParseResult ParsePlan(std::string_view text, std::string_view file_name,
                      const std::map<std::string, std::string>& overrides) {
  try {
    FieldReader in(text, file_name);
    std::optional<Plan> plan = ReadDocument(in, text, overrides);
    ParseResult result;
    result.errors = in.TakeDiagnostics();
    if (result.errors.empty()) result.plan = std::move(plan);
    return result;
  } catch (const std::exception& e) {
    // Nothing above should throw; if yaml-cpp does anyway, the plan is rejected, not the daemon.
    ParseResult result;
    result.errors.push_back(
        Diagnostic{std::string(file_name), 0, 0, std::string("internal error: ") + e.what(), ""});
    return result;
  }
}

}  // namespace deployd
