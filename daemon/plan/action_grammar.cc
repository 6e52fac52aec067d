#include "plan/action_grammar.h"

#include <algorithm>
#include <array>
#include <string_view>
#include <vector>

#include "plan/name_rules.h"
#include "util/units.h"

namespace deployd {
namespace {

constexpr std::array<std::string_view, 9> kServiceKeys = {
    "unit",        "state",       "enabled", "exec", "environment", "user", "working_directory",
    "description", "stop_timeout"};
constexpr std::array<std::string_view, 3> kKillKeys = {"match", "grace", "whole_groups"};
constexpr std::array<std::string_view, 7> kGpusFreeKeys = {
    "gpus", "max_used", "stable_for", "every", "within", "kill", "grace"};
constexpr std::array<std::string_view, 1> kRemoveKeys = {"path"};
constexpr std::array<std::string_view, 6> kDownloadKeys = {"repo",    "to",      "revision",
                                                           "include", "exclude", "size"};

// --- gpu selection ---

void ReadMaxUsed(FieldReader& in, const Fields& f, GpuSelection& gpu) {
  if (const Field* m = f.Get("max_used")) gpu.max_used = in.SizeValue(*m).value_or(gpu.max_used);
}

// "0,1,2,3" (so that a variable can hold the list).
void ReadGpuListText(FieldReader& in, const Field& g, const std::string& text, GpuSelection& gpu) {
  std::string_view rest = text;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = rest.substr(0, comma);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    std::optional<std::int64_t> n = ParseInteger(item);
    if (!n || *n < 0 || *n > 1023) {
      in.Error(ValuePos(g),
               "'gpus' must be all, a list of GPU indices or \"0,1,2,3\", not " + Quoted(text));
      gpu.gpus.clear();
      break;
    }
    if (std::find(gpu.gpus.begin(), gpu.gpus.end(), *n) != gpu.gpus.end()) {
      in.Error(ValuePos(g), "GPU " + std::to_string(*n) + " is listed twice in 'gpus'");
    } else {
      gpu.gpus.push_back(static_cast<int>(*n));
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
}

void ReadGpuListSequence(FieldReader& in, const Field& g, GpuSelection& gpu) {
  for (auto it = g.value.begin(); it != g.value.end(); ++it) {
    YAML::Node item = *it;
    if (auto n = in.Integer(item, PosOf(item), "gpus", 0, 1023)) {
      if (std::find(gpu.gpus.begin(), gpu.gpus.end(), *n) != gpu.gpus.end()) {
        in.Error(PosOf(item), "GPU " + std::to_string(*n) + " is listed twice in 'gpus'");
        continue;
      }
      gpu.gpus.push_back(static_cast<int>(*n));
    }
  }
}

// --- the actions ---

void ReadRunAction(FieldReader& in, const Field& e, Step& step) {
  if (std::optional<Command> command = in.CommandValue(e)) step.run = *command;
}

void ReadApproval(FieldReader& in, const Field& e, Step& step) {
  step.approval = in.NonEmptyString(e).value_or("");
}

// The keys that write the unit file need `exec`; a service step must change something.
void CheckServiceKeys(FieldReader& in, const Fields& f, const YAML::Node& v) {
  for (std::string_view key :
       {"environment", "user", "working_directory", "description", "stop_timeout"}) {
    if (const Field* x = f.Get(key); x && !f.Get("exec"))
      in.Error(PosOf(x->key),
               Quoted(key) + " needs 'exec' (it goes into the unit file deployd writes)");
  }
  if (!f.Get("state") && !f.Get("enabled") && !f.Get("exec"))
    in.Error(PosOf(v), "'service' needs 'state', 'enabled' or 'exec' (what should change?)");
}

void ReadService(FieldReader& in, const Field& e, Step& step) {
  ServiceAction& a = step.service;
  const YAML::Node& v = e.value;
  if (!v.IsMap()) {
    in.Error(ValuePos(e), "'service' must be a map with 'unit' and 'state' (or 'enabled')");
    return;
  }
  Fields f = in.ReadMap(v, kServiceKeys, "in 'service'");
  if (const Field* u = f.Get("unit")) {
    a.unit = ReadUnitName(in, *u).value_or("");
  } else {
    in.Error(PosOf(v), "missing required key 'unit' in 'service'");
  }
  if (const Field* st = f.Get("state")) {
    std::optional<std::string> state = in.String(*st);
    if (state == "started" || state == "stopped" || state == "restarted") {
      a.state = *state;
    } else if (state) {
      in.Error(ValuePos(*st),
               "'state' must be started, stopped or restarted, not " + Quoted(*state));
    }
  }
  if (const Field* en = f.Get("enabled")) a.enabled = in.Bool(*en);
  if (const Field* x = f.Get("exec")) {
    if (std::optional<Command> command = in.CommandValue(*x)) a.exec = command->Argv();
    if (!a.exec.empty() && !a.exec[0].starts_with("/") && a.exec[0].find('/') != std::string::npos)
      in.Error(ValuePos(*x), "'exec' program must be a name on PATH or an absolute path");
  }
  if (const Field* x = f.Get("environment")) a.environment = in.EnvMap(*x);
  if (const Field* x = f.Get("user")) a.user = in.NonEmptyString(*x).value_or("");
  if (const Field* x = f.Get("working_directory"))
    a.working_directory = in.AbsolutePath(*x).value_or("");
  if (const Field* x = f.Get("description")) a.description = in.String(*x).value_or("");
  if (const Field* x = f.Get("stop_timeout"))
    a.stop_timeout = in.DurationValue(*x).value_or(a.stop_timeout);
  CheckServiceKeys(in, f, v);
}

void ReadKill(FieldReader& in, const Field& e, Step& step) {
  const YAML::Node& v = e.value;
  if (v.IsScalar()) {
    if (auto re = in.Regex(v, ValuePos(e), "kill")) step.kill.match = *re;
    return;
  }
  if (!v.IsMap()) {
    in.Error(ValuePos(e), "'kill' must be a pattern or a map with 'match'");
    return;
  }
  Fields f = in.ReadMap(v, kKillKeys, "in 'kill'");
  if (const Field* m = f.Get("match")) {
    if (auto re = in.Regex(m->value, ValuePos(*m), "match")) step.kill.match = *re;
  } else {
    in.Error(PosOf(v), "missing required key 'match' in 'kill'");
  }
  if (const Field* g = f.Get("grace"))
    step.kill.grace = in.DurationValue(*g).value_or(step.kill.grace);
  if (const Field* w = f.Get("whole_groups")) step.kill.whole_groups = in.Bool(*w).value_or(true);
}

void ReadGpusFree(FieldReader& in, const Field& e, Step& step) {
  const YAML::Node& v = e.value;
  GpusFreeAction& a = step.gpus_free;
  if (v.IsNull()) return;  // every GPU, the defaults
  if (!v.IsMap()) {
    in.Error(ValuePos(e), "'gpus_free' must be a map (e.g. {gpus: [0, 1], max_used: 1GiB})");
    return;
  }
  Fields f = in.ReadMap(v, kGpusFreeKeys, "in 'gpus_free'");
  ReadGpuSelection(in, f, a.gpu);
  if (const Field* x = f.Get("stable_for"))
    a.stable_for = in.DurationValue(*x).value_or(a.stable_for);
  if (const Field* x = f.Get("every")) a.every = in.DurationValue(*x).value_or(a.every);
  if (const Field* x = f.Get("within")) a.within = in.DurationValue(*x).value_or(a.within);
  if (const Field* x = f.Get("kill")) a.kill = in.Bool(*x).value_or(false);
  if (const Field* x = f.Get("grace")) {
    a.grace = in.DurationValue(*x).value_or(a.grace);
    if (!a.kill)
      in.Error(PosOf(x->key), "'grace' needs 'kill: true' (nothing is stopped without it)");
  }
  if (a.every.count() < 100) {
    in.Error(PosOf(v), "'every' must be at least 100ms");
  } else if (a.within < a.stable_for) {
    in.Error(PosOf(v), "'within' (" + FormatDuration(a.within) +
                           ") must be at least 'stable_for' (" + FormatDuration(a.stable_for) +
                           ")");
  }
}

void ReadRemove(FieldReader& in, const Field& e, Step& step) {
  const YAML::Node& v = e.value;
  if (v.IsScalar()) {
    step.remove.path = in.AbsolutePath(e).value_or("");
  } else if (v.IsMap()) {
    Fields f = in.ReadMap(v, kRemoveKeys, "in 'remove'");
    if (const Field* p = f.Get("path")) {
      step.remove.path = in.AbsolutePath(*p).value_or("");
    } else {
      in.Error(PosOf(v), "missing required key 'path' in 'remove'");
    }
  } else {
    in.Error(ValuePos(e), "'remove' must be a path or a map with 'path'");
  }
}

// ORG/NAME: one slash with text on both sides, no blanks.
bool IsRepository(const std::string& repo) {
  size_t slash = repo.find('/');
  return slash != std::string::npos && slash > 0 && slash + 1 < repo.size() &&
         repo.find('/', slash + 1) == std::string::npos &&
         repo.find_first_of(" \t\n") == std::string::npos;
}

void ReadDownload(FieldReader& in, const Field& e, Step& step) {
  DownloadAction& a = step.download;
  const YAML::Node& v = e.value;
  if (!v.IsMap()) {
    in.Error(ValuePos(e), "'download' must be a map with 'repo' and 'to'");
    return;
  }
  Fields f = in.ReadMap(v, kDownloadKeys, "in 'download'");
  if (const Field* r = f.Get("repo")) {
    std::optional<std::string> repo = in.NonEmptyString(*r);
    if (repo && !IsRepository(*repo)) {
      in.Error(ValuePos(*r), "invalid repository " + Quoted(*repo) +
                                 " (expected ORG/NAME, e.g. nvidia/Kimi-K2.5-NVFP4)");
    } else if (repo) {
      a.repo = *repo;
    }
  } else {
    in.Error(PosOf(v), "missing required key 'repo' in 'download'");
  }
  if (const Field* t = f.Get("to")) {
    a.to = in.AbsolutePath(*t).value_or("");
  } else {
    in.Error(PosOf(v), "missing required key 'to' in 'download'");
  }
  if (const Field* x = f.Get("revision")) a.revision = in.NonEmptyString(*x).value_or("");
  if (const Field* x = f.Get("include"))
    for (auto& [p, pos] : in.StringList(*x)) a.include.push_back(p);
  if (const Field* x = f.Get("exclude"))
    for (auto& [p, pos] : in.StringList(*x)) a.exclude.push_back(p);
  if (const Field* x = f.Get("size")) a.size = in.SizeValue(*x);
}

// --- the table of actions ---

using ActionReader = void (*)(FieldReader&, const Field&, Step&);

struct ActionGrammar {
  ActionKind kind;
  ActionReader read;
};

// In the order messages list them.
constexpr std::array<ActionGrammar, 7> kActions = {{
    {ActionKind::kRun, ReadRunAction},
    {ActionKind::kApproval, ReadApproval},
    {ActionKind::kService, ReadService},
    {ActionKind::kKill, ReadKill},
    {ActionKind::kGpusFree, ReadGpusFree},
    {ActionKind::kRemove, ReadRemove},
    {ActionKind::kDownload, ReadDownload},
}};

}  // namespace

Keys ActionKeys() {
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> k;
    for (const ActionGrammar& a : kActions) k.push_back(ToString(a.kind));
    return k;
  }();
  return keys;
}

void ReadAction(FieldReader& in, const Field& e, Step& step) {
  for (const ActionGrammar& a : kActions) {
    if (ToString(a.kind) != e.name) continue;
    step.kind = a.kind;
    a.read(in, e, step);
    return;
  }
}

void ReadGpuSelection(FieldReader& in, const Fields& f, GpuSelection& gpu) {
  if (const Field* g = f.Get("gpus")) {
    if (g->value.IsScalar()) {
      std::optional<std::string> text = in.String(*g);
      if (text && *text != "all") ReadGpuListText(in, *g, *text, gpu);
    } else if (g->value.IsSequence()) {
      ReadGpuListSequence(in, *g, gpu);
    } else {
      in.Error(ValuePos(*g), "'gpus' must be a list of GPU indices (e.g. [0, 1, 2, 3]) or all");
    }
  }
  ReadMaxUsed(in, f, gpu);
}

std::optional<std::string> ReadUnitName(FieldReader& in, const Field& e) {
  std::optional<std::string> name = in.NonEmptyString(e);
  if (!name) return name;
  if (!IsUnitName(*name)) {
    in.Error(ValuePos(e), "invalid unit name " + Quoted(*name) + " (expected e.g. kimi.service)");
    return std::nullopt;
  }
  if (name->find('.') == std::string::npos) *name += ".service";
  return name;
}

}  // namespace deployd
