#include "plan/step_grammar.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "plan/action_grammar.h"
#include "plan/check_grammar.h"
#include "plan/name_rules.h"
#include "plan/plan_defaults.h"
#include "plan/plan_limits.h"
#include "plan/watch_grammar.h"

namespace deployd {
namespace {

// A step's keys besides `id` and its action, in the order "did you mean" prefers them.
constexpr std::array<std::string_view, 12> kOptionKeys = {
    "background",  "env",    "cwd",     "timeout", "grace",      "retries",
    "retry_delay", "verify", "skip_if", "watch",   "idempotent", "secrets"};
// Keys about a command and its process, which an approval step does not have.
constexpr std::array<std::string_view, 8> kCommandOnlyStepKeys = {
    "background", "env", "cwd", "timeout", "grace", "watch", "idempotent", "secrets"};
// Keys only a `run` step has: built-in actions choose these themselves.
constexpr std::array<std::string_view, 3> kRunOnlyStepKeys = {"background", "cwd", "idempotent"};

// "id", the actions, then the options.
Keys StepKeys() {
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> k = {"id"};
    Keys actions = ActionKeys();
    k.insert(k.end(), actions.begin(), actions.end());
    k.insert(k.end(), kOptionKeys.begin(), kOptionKeys.end());
    return k;
  }();
  return keys;
}

bool IsActionKey(std::string_view key) {
  Keys actions = ActionKeys();
  return std::find(actions.begin(), actions.end(), key) != actions.end();
}

// "approval, service, …": the actions other than `run`.
std::string OtherActions() {
  std::string list;
  for (std::string_view key : ActionKeys().subspan(1))
    list += (list.empty() ? "" : ", ") + std::string(key);
  return list;
}

// Names the step in messages by its id when it has a usable one, else by its place.
std::string StepLabel(const YAML::Node& node, int index, bool on_failure) {
  for (auto it = node.begin(); it != node.end(); ++it) {
    YAML::Node key = it->first;
    YAML::Node value = it->second;
    if (key.IsScalar() && key.Scalar() == "id" && value.IsScalar() && IsStepId(value.Scalar()))
      return std::string(on_failure ? "on_failure step " : "step ") + Quoted(value.Scalar());
  }
  return std::string(on_failure ? "on_failure step #" : "step #") + std::to_string(index);
}

}  // namespace

StepReader::StepReader(FieldReader& in, const std::set<std::string>& secrets)
    : in_(in), secrets_(secrets) {}

std::vector<Step> StepReader::ReadSteps(const Field& e, bool on_failure) {
  std::vector<Step> steps;
  bool empty = e.value.IsNull() || (e.value.IsSequence() && e.value.size() == 0);
  if (empty) {
    if (!on_failure) in_.Error(ValuePos(e), "'steps' must not be empty");
    return steps;
  }
  if (!e.value.IsSequence()) {
    in_.Error(ValuePos(e), Quoted(e.name) + " must be a list of steps");
    return steps;
  }
  steps_counted_ += e.value.size();
  if (steps_counted_ > kMaxSteps) {
    in_.Error(ValuePos(e), "too many steps (" + std::to_string(steps_counted_) +
                               "): a plan has at most " + std::to_string(kMaxSteps) +
                               ", 'steps' and 'on_failure' together");
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

std::optional<Step> StepReader::ReadStep(const YAML::Node& node, int index, bool on_failure) {
  if (!node.IsMap()) {
    in_.Error(PosOf(node), "a step must be a map with 'id' and 'run'");
    return std::nullopt;
  }
  std::string label = StepLabel(node, index, on_failure);
  Fields f = in_.ReadMap(node, StepKeys(), "in " + label);
  Step step;
  step.pos = PosOf(node);
  ReadId(f, label, step);
  ReadActionOf(f, label, step);
  ReadOptions(f, step);
  if (step.kind == ActionKind::kDownload) {
    const Field* watch = f.Get("watch");
    bool own_on_stall = watch && watch->value.IsMap() && watch->value["on_stall"];
    ApplyDownloadDefaults(own_on_stall, secrets_, step);
  }
  AddUnitExitPatterns(step);
  return step;
}

void StepReader::ReadId(const Fields& f, const std::string& label, Step& step) {
  const Field* e = f.Get("id");
  if (!e) {
    in_.Error(step.pos, "missing required key 'id' in " + label);
    return;
  }
  std::optional<std::string> id = in_.String(*e);
  if (id && !IsStepId(*id)) {
    in_.Error(ValuePos(*e),
              "invalid step id " + Quoted(*id) + " (use lowercase letters, digits, '_' and '-')");
  } else if (id) {
    auto [first, inserted] = step_ids_.emplace(*id, ValuePos(*e));
    if (!inserted) {
      in_.Error(ValuePos(*e), "duplicate step id " + Quoted(*id) + " (first defined at line " +
                                  std::to_string(first->second.line) + ")");
    }
    step.id = *id;
  }
}

// The one action key, and the keys its action does not take.
void StepReader::ReadActionOf(const Fields& f, const std::string& label, Step& step) {
  std::vector<const Field*> actions;
  for (const Field& e : f.entries)
    if (IsActionKey(e.name)) actions.push_back(&e);
  if (actions.empty()) {
    in_.Error(step.pos, "missing required key 'run' in " + label +
                            " (or another action: " + OtherActions() + ")");
    return;
  }
  if (actions.size() > 1)
    in_.Error(PosOf(actions[1]->key), "a step has one action: " + Quoted(actions[0]->name) +
                                          " or " + Quoted(actions[1]->name) + ", not both");
  ReadAction(in_, *actions[0], step);
  const ActionKind kind = step.kind;
  for (const Field& other : f.entries) {
    auto among = [&](const auto& keys) {
      return std::find(keys.begin(), keys.end(), other.name) != keys.end();
    };
    if (kind == ActionKind::kApproval && among(kCommandOnlyStepKeys)) {
      in_.Error(PosOf(other.key), Quoted(other.name) +
                                      " cannot be used with 'approval' (an approval step runs "
                                      "no command)");
    } else if (kind != ActionKind::kRun && kind != ActionKind::kApproval &&
               (among(kRunOnlyStepKeys) ||
                (other.name == "env" && kind != ActionKind::kDownload))) {
      in_.Error(PosOf(other.key), Quoted(other.name) + " cannot be used with " +
                                      Quoted(ToString(kind)) + " (a built-in action decides it)");
    }
  }
}

// Everything but the id and the action, in the order the checks between them need.
void StepReader::ReadOptions(const Fields& f, Step& step) {
  if (const Field* e = f.Get("background")) step.background = in_.Bool(*e).value_or(false);
  if (const Field* e = f.Get("env")) step.env = in_.EnvMap(*e);
  if (const Field* e = f.Get("cwd")) step.cwd = in_.NonEmptyString(*e).value_or("");
  if (const Field* e = f.Get("timeout")) {
    step.timeout = in_.DurationValue(*e);
    if (step.background && !step.approval) {  // an approval step has neither: said above
      in_.Error(PosOf(e->key),
                "'timeout' cannot be used with 'background: true' (a background "
                "step is bounded by its verify 'within')");
    }
  }
  if (const Field* e = f.Get("grace")) step.grace = in_.DurationValue(*e).value_or(step.grace);
  bool retries_unreadable = false;  // reported on its own; must not also read as "none"
  if (const Field* e = f.Get("retries")) {
    std::optional<std::int64_t> retries = in_.Integer(*e, 0, 100);
    retries_unreadable = !retries;
    step.retries = static_cast<int>(retries.value_or(0));
  }
  if (const Field* e = f.Get("retry_delay"))
    step.retry_delay = in_.DurationValue(*e).value_or(step.retry_delay);
  if (const Field* e = f.Get("verify")) step.verify = ReadChecks(in_, *e);
  if (const Field* e = f.Get("skip_if")) step.skip_if = ReadChecks(in_, *e);
  if (!f.Get("retries")) step.retries = DefaultRetries(step.kind);
  if (const Field* e = f.Get("watch"))
    step.watch = ReadWatch(in_, *e, step.retries > 0 || retries_unreadable);
  if (const Field* e = f.Get("idempotent")) step.idempotent = in_.Bool(*e).value_or(false);
  if (const Field* e = f.Get("secrets")) {
    step.secrets = SecretNames(*e);
    if (step.background && step.kind == ActionKind::kRun)
      in_.Error(PosOf(e->key),
                "'secrets' cannot be given to a background 'run' step (its output "
                "goes to the log without being redacted)");
  }
}

// `secrets: [HF_TOKEN]`: names the plan's `secrets:` section defines.
std::vector<std::string> StepReader::SecretNames(const Field& e) {
  std::vector<std::string> names;
  for (const auto& [name, pos] : in_.StringList(e)) {
    if (!secrets_.contains(name)) {
      in_.Error(pos, "unknown secret " + Quoted(name) +
                         (secrets_.empty() ? " (the plan has no 'secrets:' section)"
                                           : " (define it under the plan's 'secrets:')"));
      continue;
    }
    names.push_back(name);
  }
  return names;
}

}  // namespace deployd
