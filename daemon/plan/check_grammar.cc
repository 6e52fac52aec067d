#include "plan/check_grammar.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <string_view>
#include <utility>

#include "plan/action_grammar.h"
#include "plan/benchmark_grammar.h"
#include "plan/http_check_grammar.h"
#include "plan/name_rules.h"
#include "util/units.h"

namespace deployd {
namespace {

// Keys only a `run` check has.
constexpr std::array<std::string_view, 4> kRunOnlyKeys = {"output_matches", "version_at_least",
                                                          "version_below", "env"};
// Keys every kind has (DESIGN.md §1 "Verify").
constexpr std::array<std::string_view, 4> kTimingKeys = {"after", "every", "within", "timeout"};
constexpr std::array<std::string_view, 2> kTcpKeys = {"host", "port"};
constexpr std::array<std::string_view, 3> kFileKeys = {"path", "absent", "min_size"};
constexpr std::array<std::string_view, 3> kDiskFreeKeys = {"path", "at_least", "count_present"};
constexpr std::array<std::string_view, 2> kPortFreeKeys = {"port", "host"};
constexpr std::array<std::string_view, 2> kWeightsKeys = {"path", "sha256"};
constexpr std::array<std::string_view, 3> kServiceCheckKeys = {"unit", "state", "enabled"};
constexpr std::array<std::string_view, 2> kProcessKeys = {"match", "absent"};
constexpr std::array<std::string_view, 2> kGpusCheckKeys = {"gpus", "max_used"};
constexpr std::array<std::string_view, 4> kVersionKeys = {"run", "command", "at_least", "below"};

// --- the kinds ---

void ReadPort(FieldReader& in, const Fields& f, const YAML::Node& map, std::string_view where,
              Check& check) {
  if (const Field* port = f.Get("port")) {
    check.port = static_cast<int>(in.Integer(*port, 1, 65535).value_or(0));
  } else {
    in.Error(PosOf(map), "missing required key 'port' in " + Quoted(where));
  }
}

// "HOST:PORT"; the last colon splits, and brackets around an IPv6 host are dropped.
void ReadHostPort(FieldReader& in, const Field& e, Check& check) {
  std::optional<std::string> text = in.String(e);
  if (!text) return;
  std::size_t colon = text->rfind(':');
  std::string host = colon == std::string::npos ? "" : text->substr(0, colon);
  std::optional<std::int64_t> port;
  if (colon != std::string::npos) port = ParseInteger(std::string_view(*text).substr(colon + 1));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host.empty() || !port || *port < 1 || *port > 65535) {
    in.Error(ValuePos(e), "invalid 'tcp' address " + Quoted(*text) +
                              " (expected HOST:PORT with a port from 1 to 65535)");
    return;
  }
  check.host = host;
  check.port = static_cast<int>(*port);
}

void ReadRunCheck(FieldReader& in, const Field& e, Check& check) {
  if (auto command = in.CommandValue(e)) check.command = *command;
}

void ReadTcpCheck(FieldReader& in, const Field& e, Check& check) {
  const YAML::Node& v = e.value;
  check.host = "127.0.0.1";
  if (v.IsScalar()) {
    ReadHostPort(in, e, check);
  } else if (v.IsMap()) {
    Fields f = in.ReadMap(v, kTcpKeys, "in 'tcp'");
    if (const Field* host = f.Get("host")) check.host = in.NonEmptyString(*host).value_or("");
    ReadPort(in, f, v, "tcp", check);
  } else {
    in.Error(ValuePos(e), "'tcp' must be HOST:PORT or a map with 'port'");
  }
}

void ReadFileCheck(FieldReader& in, const Field& e, Check& check) {
  const YAML::Node& v = e.value;
  if (v.IsScalar()) {
    check.path = in.NonEmptyString(e).value_or("");
  } else if (v.IsMap()) {
    Fields f = in.ReadMap(v, kFileKeys, "in 'file'");
    if (const Field* path = f.Get("path")) {
      check.path = in.NonEmptyString(*path).value_or("");
    } else {
      in.Error(PosOf(v), "missing required key 'path' in 'file'");
    }
    if (const Field* absent = f.Get("absent")) check.absent = in.Bool(*absent).value_or(false);
    if (const Field* min_size = f.Get("min_size")) {
      check.min_size = in.SizeValue(*min_size);
      if (check.absent)
        in.Error(PosOf(min_size->key), "'min_size' cannot be used with 'absent: true'");
    }
  } else {
    in.Error(ValuePos(e), "'file' must be a path or a map with 'path'");
  }
}

void ReadCommandCheck(FieldReader& in, const Field& e, Check& check) {
  std::optional<std::string> name = in.NonEmptyString(e);
  if (name && name->find_first_of(" \t\n") != std::string::npos) {
    in.Error(ValuePos(e), "'command' must be a program name (e.g. hf), not a command line");
  } else if (name) {
    check.name = *name;
  }
}

void ReadDiskFreeCheck(FieldReader& in, const Field& e, Check& check) {
  const YAML::Node& v = e.value;
  if (!v.IsMap()) {
    in.Error(ValuePos(e), "'disk_free' must be a map with 'path' and 'at_least'");
    return;
  }
  Fields f = in.ReadMap(v, kDiskFreeKeys, "in 'disk_free'");
  if (const Field* path = f.Get("path")) {
    check.path = in.NonEmptyString(*path).value_or("");
  } else {
    in.Error(PosOf(v), "missing required key 'path' in 'disk_free'");
  }
  if (const Field* at_least = f.Get("at_least")) {
    check.at_least = in.SizeValue(*at_least).value_or(0);
  } else {
    in.Error(PosOf(v), "missing required key 'at_least' in 'disk_free'");
  }
  // A download's destination: what is already there counts (it resumes), and the path may not
  // exist yet.
  if (const Field* present = f.Get("count_present"))
    check.credit_existing = in.Bool(*present).value_or(false);
}

void ReadPortFreeCheck(FieldReader& in, const Field& e, Check& check) {
  const YAML::Node& v = e.value;
  check.host = "0.0.0.0";
  if (v.IsScalar()) {
    check.port = static_cast<int>(in.Integer(e, 1, 65535).value_or(0));
  } else if (v.IsMap()) {
    Fields f = in.ReadMap(v, kPortFreeKeys, "in 'port_free'");
    if (const Field* host = f.Get("host")) check.host = in.NonEmptyString(*host).value_or("");
    ReadPort(in, f, v, "port_free", check);
  } else {
    in.Error(ValuePos(e), "'port_free' must be a port or a map with 'port'");
  }
}

// sha256: {model-00001-of-00064.safetensors: 64 hex digits, …}
void ReadDigests(FieldReader& in, const Field& e, Check& check) {
  if (!e.value.IsMap()) {
    in.Error(ValuePos(e), "'sha256' must be a map of file names to hex digests");
    return;
  }
  for (const Field& file : in.Entries(e.value)) {
    std::optional<std::string> digest = in.String(file);
    if (!digest) continue;
    if (!IsSha256Hex(*digest)) {
      in.Error(ValuePos(file),
               "invalid sha256 digest for " + Quoted(file.name) + " (expected 64 hex digits)");
      continue;
    }
    if (file.name.starts_with("/") || file.name.find("..") != std::string::npos) {
      in.Error(PosOf(file.key),
               "sha256 file names are relative to the model directory, not " + Quoted(file.name));
      continue;
    }
    std::string lower = *digest;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    check.sha256[file.name] = lower;
  }
}

void ReadWeightsCheck(FieldReader& in, const Field& e, Check& check) {
  const YAML::Node& v = e.value;
  if (v.IsScalar()) {
    check.path = in.NonEmptyString(e).value_or("");
  } else if (v.IsMap()) {
    Fields f = in.ReadMap(v, kWeightsKeys, "in 'weights_complete'");
    if (const Field* path = f.Get("path")) {
      check.path = in.NonEmptyString(*path).value_or("");
    } else {
      in.Error(PosOf(v), "missing required key 'path' in 'weights_complete'");
    }
    if (const Field* sha = f.Get("sha256")) ReadDigests(in, *sha, check);
  } else {
    in.Error(ValuePos(e),
             "'weights_complete' must be the path of a model directory or a map "
             "with 'path' (and 'sha256')");
  }
}

void ReadServiceCheck(FieldReader& in, const Field& e, Check& check) {
  const YAML::Node& v = e.value;
  if (v.IsScalar()) {
    check.unit = ReadUnitName(in, e).value_or("");
  } else if (v.IsMap()) {
    Fields f = in.ReadMap(v, kServiceCheckKeys, "in 'service' check");
    if (const Field* u = f.Get("unit")) {
      check.unit = ReadUnitName(in, *u).value_or("");
    } else {
      in.Error(PosOf(v), "missing required key 'unit' in 'service'");
    }
    if (const Field* st = f.Get("state")) {
      std::optional<std::string> state = in.String(*st);
      if (state == "started" || state == "stopped") {
        check.unit_state = *state;
      } else if (state) {
        in.Error(ValuePos(*st),
                 "'state' of a 'service' check must be started or stopped, not " + Quoted(*state));
      }
    }
    if (const Field* en = f.Get("enabled")) check.enabled = in.Bool(*en);
  } else {
    in.Error(ValuePos(e), "'service' must be a unit name or a map with 'unit'");
  }
}

void ReadProcessCheck(FieldReader& in, const Field& e, Check& check) {
  const YAML::Node& v = e.value;
  if (v.IsScalar()) {
    if (auto re = in.Regex(v, ValuePos(e), "process")) check.match = *re;
  } else if (v.IsMap()) {
    Fields f = in.ReadMap(v, kProcessKeys, "in 'process'");
    if (const Field* m = f.Get("match")) {
      if (auto re = in.Regex(m->value, ValuePos(*m), "match")) check.match = *re;
    } else {
      in.Error(PosOf(v), "missing required key 'match' in 'process'");
    }
    if (const Field* a = f.Get("absent")) check.absent = in.Bool(*a).value_or(false);
  } else {
    in.Error(ValuePos(e), "'process' must be a pattern or a map with 'match'");
  }
}

void ReadGpusFreeCheck(FieldReader& in, const Field& e, Check& check) {
  const YAML::Node& v = e.value;
  if (v.IsMap()) {
    Fields f = in.ReadMap(v, kGpusCheckKeys, "in 'gpus_free' check");
    ReadGpuSelection(in, f, check.gpu);
  } else if (!v.IsNull()) {
    in.Error(ValuePos(e), "'gpus_free' must be a map (e.g. {gpus: [0, 1], max_used: 1GiB})");
  }
}

// `at_least` and `below` of a `version` check, `version_at_least` and `version_below` of a `run`
// check.
void ReadVersionBound(FieldReader& in, const Field& e, bool below, Check& check) {
  std::optional<std::string> v = in.String(e);
  if (v && !IsVersion(*v)) {
    in.Error(ValuePos(e), "invalid version " + Quoted(*v) + " (expected e.g. 0.15.0 or 0.16.0rc2)");
  } else if (v) {
    (below ? check.version_below : check.version_at_least) = *v;
  }
}

// A run check that compares the first version in the output.
void ReadVersionCheck(FieldReader& in, const Field& e, Check& check) {
  const YAML::Node& v = e.value;
  if (!v.IsMap()) {
    in.Error(ValuePos(e),
             "'version' must be a map with 'command' or 'run', and 'at_least' or "
             "'below'");
    return;
  }
  Fields f = in.ReadMap(v, kVersionKeys, "in 'version'");
  const Field* run = f.Get("run");
  const Field* command = f.Get("command");
  if (run && command) {
    in.Error(PosOf(command->key), "'version' takes 'command' or 'run', not both");
  } else if (run) {
    if (std::optional<Command> c = in.CommandValue(*run)) check.command = *c;
  } else if (command) {
    std::optional<std::string> name = in.NonEmptyString(*command);
    if (name && name->find_first_of(" \t\n") != std::string::npos) {
      in.Error(ValuePos(*command), "'command' must be a program name (its --version is asked)");
    } else if (name) {
      check.command.argv = {*name, "--version"};
    }
  } else {
    in.Error(PosOf(v), "missing required key 'command' or 'run' in 'version'");
  }
  if (const Field* x = f.Get("at_least")) ReadVersionBound(in, *x, false, check);
  if (const Field* x = f.Get("below")) ReadVersionBound(in, *x, true, check);
  if (!f.Get("at_least") && !f.Get("below"))
    in.Error(PosOf(v), "'version' needs 'at_least' or 'below'");
}

// --- the table of kinds ---

using KindReader = void (*)(FieldReader&, const Field&, Check&);

struct KindGrammar {
  std::string_view key;
  CheckKind kind;
  KindReader read;
};

// Every key that names a check's kind, in the order messages list them: each CheckKind by its
// name, then `version`, which reads as a run check.
const std::vector<KindGrammar>& KindGrammars() {
  static const std::vector<KindGrammar> grammars = [] {
    std::vector<KindGrammar> g;
    auto add = [&](CheckKind kind, KindReader read) { g.push_back({ToString(kind), kind, read}); };
    add(CheckKind::kRun, ReadRunCheck);
    add(CheckKind::kHttp, ReadHttpCheck);
    add(CheckKind::kTcp, ReadTcpCheck);
    add(CheckKind::kFile, ReadFileCheck);
    add(CheckKind::kCommand, ReadCommandCheck);
    add(CheckKind::kDiskFree, ReadDiskFreeCheck);
    add(CheckKind::kPortFree, ReadPortFreeCheck);
    add(CheckKind::kWeightsComplete, ReadWeightsCheck);
    add(CheckKind::kService, ReadServiceCheck);
    add(CheckKind::kProcess, ReadProcessCheck);
    add(CheckKind::kGpusFree, ReadGpusFreeCheck);
    add(CheckKind::kBenchmark, ReadBenchmarkCheck);
    g.push_back({"version", CheckKind::kRun, ReadVersionCheck});
    return g;
  }();
  return grammars;
}

const KindGrammar* FindKind(std::string_view key) {
  for (const KindGrammar& g : KindGrammars())
    if (g.key == key) return &g;
  return nullptr;
}

// "run, http, …, version"
const std::string& KindList() {
  static const std::string list = [] {
    std::string s;
    for (const KindGrammar& g : KindGrammars()) s += (s.empty() ? "" : ", ") + std::string(g.key);
    return s;
  }();
  return list;
}

// The kinds, the timing keys, then the run-only keys.
Keys CheckKeys() {
  static const std::vector<std::string_view> keys = [] {
    std::vector<std::string_view> k;
    for (const KindGrammar& g : KindGrammars()) k.push_back(g.key);
    k.insert(k.end(), kTimingKeys.begin(), kTimingKeys.end());
    k.insert(k.end(), kRunOnlyKeys.begin(), kRunOnlyKeys.end());
    return k;
  }();
  return keys;
}

// --- a check ---

// The keys only a `run` check has; `kind` is the check's kind key, or empty when it has none.
void ReadRunOnlyKeys(FieldReader& in, const Fields& fields, std::string_view kind, Check& check) {
  for (std::string_view key : kRunOnlyKeys) {
    const Field* e = fields.Get(key);
    if (!e) continue;
    if (!kind.empty() && kind != "run") {
      in.Error(PosOf(e->key), Quoted(key) + " is only allowed in a 'run' check");
    } else if (key == "output_matches") {
      if (auto re = in.Regex(e->value, ValuePos(*e), key)) check.output_matches = *re;
    } else if (key == "version_at_least" || key == "version_below") {
      ReadVersionBound(in, *e, key == "version_below", check);
    } else {
      check.env = in.EnvMap(*e);
    }
  }
}

void ReadTiming(FieldReader& in, const Fields& fields, Check& check) {
  if (const Field* e = fields.Get("after"))
    check.after = in.DurationValue(*e).value_or(check.after);
  if (const Field* e = fields.Get("every"))
    check.every = in.DurationValue(*e).value_or(check.every);
  if (const Field* e = fields.Get("within")) check.within = in.DurationValue(*e);
  if (const Field* e = fields.Get("timeout"))
    check.timeout = in.DurationValue(*e).value_or(check.timeout);
  if (const Field* every = fields.Get("every"); every && !fields.Get("within"))
    in.Error(PosOf(every->key), "'every' needs 'within' (how long to keep trying)");
}

std::optional<Check> ReadCheck(FieldReader& in, const YAML::Node& node) {
  if (!node.IsMap()) {
    in.Error(PosOf(node), "a check must be a map with one of: " + KindList());
    return std::nullopt;
  }
  // Peek at the kind first so that unknown keys can say which check they are in.
  std::string kind;
  for (auto it = node.begin(); it != node.end() && kind.empty(); ++it) {
    YAML::Node key = it->first;
    if (key.IsScalar() && FindKind(key.Scalar())) kind = key.Scalar();
  }
  Fields fields =
      in.ReadMap(node, CheckKeys(), kind.empty() ? "in check" : "in " + Quoted(kind) + " check");
  std::vector<const Field*> kinds;
  for (const Field& e : fields.entries) {
    if (FindKind(e.name)) kinds.push_back(&e);
  }
  Check check;
  check.pos = PosOf(node);
  if (kinds.empty()) {
    in.Error(check.pos, "check has no kind (expected exactly one of: " + KindList() + ")");
  } else {
    if (kinds.size() > 1) {
      in.Error(PosOf(kinds[1]->key), "check has more than one kind, " + Quoted(kinds[0]->name) +
                                         " and " + Quoted(kinds[1]->name) +
                                         " (expected exactly one of: " + KindList() + ")");
    }
    const KindGrammar* grammar = FindKind(kinds[0]->name);
    check.kind = grammar->kind;
    grammar->read(in, *kinds[0], check);
  }
  ReadRunOnlyKeys(in, fields, kinds.empty() ? "" : kinds[0]->name, check);
  ReadTiming(in, fields, check);
  return check;
}

}  // namespace

std::vector<Check> ReadChecks(FieldReader& in, const Field& e) {
  std::vector<Check> checks;
  if (e.value.IsNull()) return checks;
  if (!e.value.IsSequence()) {
    in.Error(ValuePos(e), Quoted(e.name) + " must be a list of checks");
    return checks;
  }
  bool benchmark = false;
  for (auto it = e.value.begin(); it != e.value.end(); ++it) {
    std::optional<Check> check = ReadCheck(in, *it);
    if (!check) continue;
    // A benchmark loads the server and its figures are its step's: once, where a step proves
    // what it did.
    if (check->kind == CheckKind::kBenchmark && e.name != "verify") {
      in.Error(check->pos,
               "'benchmark' is only allowed in a step's 'verify' (it loads the server with "
               "requests)");
    } else if (check->kind == CheckKind::kBenchmark && std::exchange(benchmark, true)) {
      in.Error(check->pos, "a step has at most one 'benchmark' check (its figures are the step's)");
    }
    checks.push_back(std::move(*check));
  }
  return checks;
}

}  // namespace deployd
