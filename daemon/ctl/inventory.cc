#include "ctl/inventory.h"

#include <fnmatch.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <functional>

#include "ctl/inventory_builder.h"
#include "ctl/ssh_transport.h"

namespace deployd::ctl {

// The readers of each format (inventory_ini.cc, inventory_yaml.cc).
void ReadIniInventory(std::string_view text, InventoryBuilder& out);
// False when `text` is not a YAML map (then it may be INI); else it was read into `out`.
bool ReadYamlInventory(std::string_view text, bool must, InventoryBuilder& out);

namespace {

constexpr std::string_view kAll = "all";
constexpr std::string_view kUngrouped = "ungrouped";

bool EndsWith(const std::string& s, std::string_view suffix) { return s.ends_with(suffix); }

std::string Located(const std::string& file, int line, int column) {
  std::string where = file;
  if (line > 0) where += ":" + std::to_string(line);
  if (line > 0 && column > 0) where += ":" + std::to_string(column);
  return where;
}

const InventoryValue* Var(const InventoryHost& host, std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (auto it = host.vars.find(name); it != host.vars.end()) return &it->second;
  return nullptr;
}

}  // namespace

InventoryBuilder::InventoryBuilder(std::string file) : file_(std::move(file)) {
  groups_[std::string(kAll)];
  groups_[std::string(kUngrouped)];
}

void InventoryBuilder::Error(int line, int column, const std::string& message) {
  errors_.push_back(Located(file_, line, column) + ": error: " + message);
}

void InventoryBuilder::Group(const std::string& name, int line) {
  GroupData& g = groups_[name];
  if (g.line == 0) g.line = line;
}

void InventoryBuilder::GroupVar(const std::string& group, const std::string& key,
                                InventoryValue value) {
  Group(group, value.line);
  groups_[group].vars[key] = std::move(value);
}

void InventoryBuilder::Child(const std::string& parent, const std::string& child, int line) {
  Group(parent, line);
  Group(child, line);
  std::vector<std::string>& children = groups_[parent].children;
  if (std::find(children.begin(), children.end(), child) == children.end())
    children.push_back(child);
}

void InventoryBuilder::Host(const std::string& group, const std::string& host, int line,
                            InventoryVars vars) {
  if (!hosts_.count(host) && hosts_.size() >= kMaxInventoryHosts) {
    if (!too_many_) Error(line, 0, "more than " + std::to_string(kMaxInventoryHosts) + " hosts");
    too_many_ = true;
    return;
  }
  auto [it, fresh] = hosts_.try_emplace(host);
  if (fresh) {
    it->second.line = line;
    host_order_.push_back(host);
  }
  for (auto& [k, v] : vars) it->second.vars[k] = std::move(v);
  if (!group.empty() && group != kAll) {
    Group(group, line);
    it->second.groups.push_back(group);
  }
}

bool InventoryBuilder::NoCycle(const std::string& name, std::set<std::string>& done,
                               std::vector<std::string>& path) {
  if (auto seen = std::find(path.begin(), path.end(), name); seen != path.end()) {
    std::string cycle;
    for (auto it = seen; it != path.end(); ++it) cycle += *it + " → ";
    Error(groups_[name].line, 0, "group '" + name + "' contains itself (" + cycle + name + ")");
    return false;
  }
  if (done.count(name)) return true;
  path.push_back(name);
  for (const std::string& child : groups_[name].children)
    if (!NoCycle(child, done, path)) return false;
  path.pop_back();
  done.insert(name);
  return true;
}

void InventoryBuilder::Depths(const std::string& name, std::map<std::string, int>& depth) {
  for (const std::string& child : groups_[name].children) {
    // Only a deeper path can change what lies below; this also bounds the walk.
    if (depth.count(child) && depth[child] >= depth[name] + 1) continue;
    depth[child] = depth[name] + 1;
    Depths(child, depth);
  }
}

InventoryResult InventoryBuilder::Finish() {
  InventoryResult result;
  // A group nobody contains hangs below `all`.
  std::set<std::string> contained;
  for (const auto& [name, g] : groups_) contained.insert(g.children.begin(), g.children.end());
  for (const auto& [name, g] : groups_)
    if (name != kAll && !contained.count(name)) groups_[std::string(kAll)].children.push_back(name);
  std::map<std::string, std::vector<std::string>> parents;
  for (const auto& [name, g] : groups_)
    for (const std::string& child : g.children) parents[child].push_back(name);
  std::set<std::string> done;
  for (const auto& [name, g] : groups_) {
    std::vector<std::string> path;
    if (!NoCycle(name, done, path)) break;
  }
  std::map<std::string, int> depth{{std::string(kAll), 0}};
  if (errors_.empty()) Depths(std::string(kAll), depth);
  if (errors_.empty() && hosts_.empty()) Error(0, 0, "no hosts in the inventory");
  if (!errors_.empty()) {
    result.errors = errors_;
    return result;
  }
  Inventory inventory;
  inventory.file = file_;
  for (const auto& [name, g] : groups_) inventory.groups.insert(name);
  for (const std::string& name : host_order_) {
    const HostData& data = hosts_[name];
    InventoryHost host;
    host.name = name;
    host.line = data.line;
    std::vector<std::string> todo = data.groups;
    if (todo.empty()) todo.push_back(std::string(kUngrouped));
    while (!todo.empty()) {
      std::string g = todo.back();
      todo.pop_back();
      if (!host.groups.insert(g).second) continue;
      for (const std::string& p : parents[g]) todo.push_back(p);
    }
    std::vector<std::string> order(host.groups.begin(), host.groups.end());
    std::stable_sort(order.begin(), order.end(), [&](const std::string& a, const std::string& b) {
      return depth[a] < depth[b];
    });
    for (const std::string& g : order)
      for (const auto& [k, v] : groups_[g].vars) host.vars[k] = v;
    for (const auto& [k, v] : data.vars) host.vars[k] = v;
    inventory.hosts.push_back(std::move(host));
  }
  result.inventory = std::move(inventory);
  return result;
}

Result<std::vector<std::string>> ExpandHostRange(std::string_view name) {
  size_t open = name.find('[');
  if (open == std::string_view::npos) return std::vector<std::string>{std::string(name)};
  size_t close = name.find(']', open);
  auto bad = [&](const std::string& why) {
    return Status::Error("invalid range in '" + std::string(name) + "': " + why +
                         " (expected e.g. gpu[01:20] or db-[a:c])");
  };
  if (close == std::string_view::npos) return bad("no ']'");
  std::string_view spec = name.substr(open + 1, close - open - 1);
  size_t c1 = spec.find(':');
  if (c1 == std::string_view::npos) return bad("no ':' between the bounds");
  std::string_view first = spec.substr(0, c1);
  std::string_view rest = spec.substr(c1 + 1);
  size_t c2 = rest.find(':');
  std::string_view last = rest.substr(0, c2);
  int step = 1;
  if (c2 != std::string_view::npos) {
    std::string_view s = rest.substr(c2 + 1);
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), step);
    if (ec != std::errc() || p != s.data() + s.size() || step < 1) return bad("a bad step");
  }
  std::vector<std::string> items;
  const std::string too_many =
      "it names more than " + std::to_string(kMaxInventoryHosts) + " hosts";
  auto number = [](std::string_view s, int& out) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
    return !s.empty() && ec == std::errc() && p == s.data() + s.size();
  };
  int lo = 0, hi = 0;
  if (number(first, lo) && number(last, hi)) {
    if (lo > hi) return bad("the first bound is above the last");
    if (static_cast<size_t>((static_cast<std::int64_t>(hi) - lo) / step) >= kMaxInventoryHosts)
      return bad(too_many);
    for (int i = lo; i <= hi; i += step) {
      std::string digits = std::to_string(i);
      if (digits.size() < first.size()) digits.insert(0, first.size() - digits.size(), '0');
      items.push_back(digits);
    }
  } else if (first.size() == 1 && last.size() == 1 && std::isalpha(first[0]) &&
             std::isalpha(last[0]) && first[0] <= last[0]) {
    for (int c = first[0]; c <= last[0]; c += step) items.push_back(std::string(1, char(c)));
  } else {
    return bad("the bounds must be two numbers or two letters in order");
  }
  Result<std::vector<std::string>> tails = ExpandHostRange(name.substr(close + 1));
  if (!tails.ok()) return tails.status();
  if (items.size() * tails->size() > kMaxInventoryHosts) return bad(too_many);
  std::vector<std::string> names;
  for (const std::string& item : items)
    for (const std::string& tail : tails.value())
      names.push_back(std::string(name.substr(0, open)) + item + tail);
  return names;
}

InventoryResult ParseInventory(std::string_view text, const std::string& file) {
  InventoryBuilder builder(file);
  bool yaml = EndsWith(file, ".yaml") || EndsWith(file, ".yml") || EndsWith(file, ".json");
  if (yaml) {
    ReadYamlInventory(text, true, builder);
  } else if (EndsWith(file, ".ini") || !ReadYamlInventory(text, false, builder)) {
    ReadIniInventory(text, builder);
  }
  return builder.Finish();
}

Result<std::vector<InventoryHost>> LimitHosts(const Inventory& inventory,
                                              std::string_view pattern) {
  if (pattern.empty()) return inventory.hosts;
  auto matches = [&](const std::string& term) {
    std::set<std::string> names;
    bool every = term == kAll || term == "*";
    for (const InventoryHost& h : inventory.hosts) {
      bool in = every || ::fnmatch(term.c_str(), h.name.c_str(), 0) == 0;
      for (const std::string& g : h.groups) in = in || ::fnmatch(term.c_str(), g.c_str(), 0) == 0;
      if (in) names.insert(h.name);
    }
    return names;
  };
  std::optional<std::set<std::string>> chosen;
  std::vector<std::set<std::string>> intersect, exclude;
  size_t start = 0;
  while (start <= pattern.size()) {
    size_t end = pattern.find_first_of(":,", start);
    std::string term(pattern.substr(start, end == std::string_view::npos ? end : end - start));
    start = end == std::string_view::npos ? pattern.size() + 1 : end + 1;
    if (term.empty()) continue;
    char op = term[0] == '&' || term[0] == '!' ? term[0] : 0;
    std::string what = op ? term.substr(1) : term;
    if (what.starts_with("~") || what.starts_with("@"))
      return Status::Error("--limit: '" + what +
                           "': regular expressions (~) and retry files (@) are not supported; "
                           "use names and globs (*, ?, [..])");
    std::set<std::string> found = matches(what);
    if (found.empty())
      return Status::Error("--limit: '" + what + "' matches no host or group of " + inventory.file);
    if (op == '&') {
      intersect.push_back(std::move(found));
    } else if (op == '!') {
      exclude.push_back(std::move(found));
    } else {
      if (!chosen) chosen.emplace();
      chosen->insert(found.begin(), found.end());
    }
  }
  std::vector<InventoryHost> hosts;
  for (const InventoryHost& h : inventory.hosts) {
    bool in = !chosen || chosen->count(h.name);
    for (const auto& s : intersect) in = in && s.count(h.name);
    for (const auto& s : exclude) in = in && !s.count(h.name);
    if (in) hosts.push_back(h);
  }
  if (hosts.empty())
    return Status::Error("--limit '" + std::string(pattern) + "' leaves no host of " +
                         inventory.file);
  return hosts;
}

Result<std::string> HostAddress(const InventoryHost& host, const std::string& file) {
  auto fail = [&](const InventoryValue* v, const std::string& why) {
    return Status::Error(Located(file, v ? v->line : host.line, 0) + ": error: host '" + host.name +
                         "': " + why);
  };
  if (const InventoryValue* c = Var(host, {"ansible_connection"});
      c && c->text != "ssh" && c->text != "smart" && c->text != "paramiko")
    return fail(c, "ansible_connection '" + c->text +
                       "' is not supported (deployctl reaches hosts with ssh)");
  SshTarget target;
  const InventoryValue* address = Var(host, {"ansible_host", "ansible_ssh_host"});
  target.host = address ? address->text : host.name;
  if (const InventoryValue* user = Var(host, {"ansible_user", "ansible_ssh_user"}))
    target.user = user->text;
  const InventoryValue* port = Var(host, {"ansible_port", "ansible_ssh_port"});
  if (port) {
    const std::string& p = port->text;
    auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), target.port);
    if (ec != std::errc() || end != p.data() + p.size() || target.port < 1 || target.port > 65535)
      return fail(port, "ansible_port must be a port number (1 to 65535), not '" + p + "'");
  }
  std::string url = target.Url();
  Result<SshTarget> checked = ParseSshUrl(url);
  if (!checked.ok()) return fail(address, checked.status().message());
  return url;
}

}  // namespace deployd::ctl
