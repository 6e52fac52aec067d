// Ansible's YAML inventory format (inventory.h):
//
//   all:
//     hosts:
//       gpu-spare: {ansible_host: 10.1.230.180}
//     children:
//       kimi:
//         hosts:
//           gpu[01:04]:
//           gpu05: {ansible_port: 2222, cuda_visible_devices: "0,1,2,3"}
//         vars:
//           model_dir: /shared/kimi
//
// A group is a map of `hosts` (host name → its variables, or nothing), `vars` and `children`
// (group name → a group, or nothing); any other key is an error. Scalars are kept as written.
#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "ctl/inventory_builder.h"

namespace deployd::ctl {

namespace {

constexpr int kMaxDepth = 64;

int Line(const YAML::Node& n) { return n.Mark().line + 1; }
int Column(const YAML::Node& n) { return n.Mark().column + 1; }

class YamlReader {
 public:
  explicit YamlReader(InventoryBuilder& out) : out_(out) {}

  void Group(const std::string& name, const YAML::Node& node, int depth) {
    if (depth > kMaxDepth) return Error(node, "groups are nested too deeply");
    if (!node || node.IsNull()) return;
    if (!node.IsMap())
      return Error(node, "group '" + name + "' must be a map of hosts, vars and children");
    for (const auto& entry : node) {
      std::string key = Key(entry.first);
      if (key == "hosts") {
        Hosts(name, entry.second);
      } else if (key == "vars") {
        if (entry.second.IsNull()) continue;
        if (!entry.second.IsMap())
          Error(entry.second, "'vars' of group '" + name + "' must be a map");
        else
          for (auto& [k, v] : Vars(entry.second)) out_.GroupVar(name, k, v);
      } else if (key == "children") {
        Children(name, entry.second, depth);
      } else if (!key.empty()) {
        Error(entry.first, "unknown key '" + key + "' in group '" + name +
                               "' (expected hosts, vars or children)");
      }
    }
  }

  void Error(const YAML::Node& at, const std::string& message) {
    out_.Error(Line(at), Column(at), message);
  }

 private:
  std::string Key(const YAML::Node& key) {
    if (!key.IsScalar() || key.Scalar().empty()) {
      Error(key, "keys must be strings");
      return "";
    }
    return key.Scalar();
  }

  void Hosts(const std::string& group, const YAML::Node& node) {
    if (node.IsNull()) return;
    if (!node.IsMap())
      return Error(node, "'hosts' of group '" + group +
                             "' must be a map of host names (to their variables, or nothing)");
    for (const auto& entry : node) {
      std::string pattern = Key(entry.first);
      if (pattern.empty()) continue;
      if (!entry.second.IsNull() && !entry.second.IsMap()) {
        Error(entry.second, "host '" + pattern + "' must map to its variables (a map) or nothing");
        continue;
      }
      InventoryVars vars = entry.second.IsNull() ? InventoryVars{} : Vars(entry.second);
      Result<std::vector<std::string>> names = ExpandHostRange(pattern);
      if (!names.ok()) {
        Error(entry.first, names.status().message());
        continue;
      }
      for (const std::string& name : names.value()) out_.Host(group, name, Line(entry.first), vars);
    }
  }

  void Children(const std::string& group, const YAML::Node& node, int depth) {
    if (node.IsNull()) return;
    if (!node.IsMap())
      return Error(node, "'children' of group '" + group + "' must be a map of groups");
    for (const auto& entry : node) {
      std::string child = Key(entry.first);
      if (child.empty()) continue;
      out_.Child(group, child, Line(entry.first));
      Group(child, entry.second, depth + 1);
    }
  }

  InventoryVars Vars(const YAML::Node& map) {
    InventoryVars vars;
    for (const auto& entry : map) {
      std::string key = Key(entry.first);
      if (key.empty()) continue;
      InventoryValue value{"", Line(entry.second), ""};
      if (entry.second.IsScalar()) {
        value.text = entry.second.Scalar();
      } else if (!entry.second.IsNull()) {
        value.not_scalar = entry.second.IsSequence() ? "a list" : "a map";
      }
      vars[key] = std::move(value);
    }
    return vars;
  }

  InventoryBuilder& out_;
};

}  // namespace

bool ReadYamlInventory(std::string_view text, bool must, InventoryBuilder& out) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    if (!must) return false;
    out.Error(e.mark.line + 1, e.mark.column + 1, "invalid YAML: " + e.msg);
    return true;
  }
  bool groups = root.IsMap();
  for (const auto& entry : root) groups = groups && (entry.second.IsMap() || entry.second.IsNull());
  if (!must && !groups) return false;
  YamlReader reader(out);
  if (!root.IsMap()) {
    out.Error(0, 0, "a YAML inventory is a map of groups (e.g. all: {hosts: {gpu1: }})");
    return true;
  }
  for (const auto& entry : root) {
    if (!entry.first.IsScalar()) {
      reader.Error(entry.first, "keys must be strings");
      continue;
    }
    reader.Group(entry.first.Scalar(), entry.second, 0);
    out.Group(entry.first.Scalar(), Line(entry.first));
  }
  return true;
}

}  // namespace deployd::ctl
