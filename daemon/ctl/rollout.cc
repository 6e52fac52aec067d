// deployctl rollout PLAN --inventory FILE: checks everything on this side — the inventory, the
// plan with each host's variables, the batches — before the coordinator is asked, then starts
// the rollout as a run of the coordinator (rollout_spec.h) and prints its id first.
#include <sys/random.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <boost/json.hpp>
#include <climits>
#include <iostream>
#include <map>
#include <set>

#include "ctl/inventory.h"
#include "ctl/plan_input.h"
#include "ctl/rollout_verbs.h"
#include "deployd/protocol.h"
#include "plan/plan_parser.h"
#include "util/units.h"

namespace deployd::ctl {

namespace json = boost::json;

namespace {

// What the environment gives ssh, handed to the rollout's steps: they run under the
// coordinator, whose own environment may lack them.
constexpr const char* kSshEnvironment[] = {"SSH_AUTH_SOCK", "DEPLOYD_SSH_COMMAND",
                                           "XDG_RUNTIME_DIR"};

// The names under the plan's `vars:`; an unreadable plan has none here (its parse says why).
std::set<std::string> DeclaredVars(const std::string& text) {
  std::set<std::string> names;
  try {
    YAML::Node vars = YAML::Load(text)["vars"];
    if (vars.IsMap())
      for (const auto& entry : vars)
        if (entry.first.IsScalar()) names.insert(entry.first.Scalar());
  } catch (const YAML::Exception&) {
  }
  return names;
}

std::string RandomId() {
  unsigned char bytes[6];
  if (::getrandom(bytes, sizeof bytes, 0) != static_cast<ssize_t>(sizeof bytes))
    Die(kExitUsage, "cannot make a rollout id: no randomness");
  static const char* kHex = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

std::string SelfPath() {
  char path[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "deployctl";
}

// Each host with its address and the plan's variables from the inventory (then --var); the
// plan checked with each host's. Every problem is printed; dies with exit status 2 after.
std::vector<RolloutHost> CheckHosts(const RolloutOptions& o, const std::string& plan_text,
                                    const Inventory& inventory,
                                    const std::vector<InventoryHost>& chosen) {
  std::set<std::string> declared = DeclaredVars(plan_text);
  std::map<std::string, std::string> overrides = ParseVars(o.vars);
  std::vector<RolloutHost> hosts;
  std::vector<std::string> problems;
  // A plan that fails the same way for every host is said once, naming the hosts.
  std::map<std::string, std::vector<std::string>> diagnostics;
  std::vector<std::string> order;
  for (const InventoryHost& h : chosen) {
    RolloutHost host{h.name, "", {}};
    // Ansible's name for the host's own name in the inventory, for the plans that ask.
    if (declared.count("inventory_hostname")) host.vars["inventory_hostname"] = h.name;
    Result<std::string> address = HostAddress(h, inventory.file);
    if (!address.ok()) problems.push_back(address.status().message());
    if (address.ok()) host.address = address.value();
    for (const auto& [name, value] : h.vars) {
      if (!declared.count(name) || overrides.count(name)) continue;
      if (!value.not_scalar.empty()) {
        problems.push_back(inventory.file + ":" + std::to_string(value.line) + ": error: host '" +
                           h.name + "': variable '" + name + "' is " + value.not_scalar +
                           "; a plan's variables are strings");
        continue;
      }
      host.vars[name] = value.text;
    }
    for (const auto& [name, value] : overrides) host.vars[name] = value;
    ParseResult parsed = ParsePlan(plan_text, o.plan, host.vars);
    for (const Diagnostic& d : parsed.errors) {
      std::string text = d.Format();
      if (!diagnostics.count(text)) order.push_back(text);
      diagnostics[text].push_back(h.name);
    }
    hosts.push_back(std::move(host));
  }
  for (const std::string& p : problems) std::cerr << p << "\n";
  for (const std::string& text : order) {
    std::cerr << text << "\n";
    const std::vector<std::string>& names = diagnostics[text];
    if (names.size() == chosen.size()) continue;
    std::string list;
    for (const std::string& n : names) list += (list.empty() ? "" : ", ") + n;
    std::cerr << "  (with the variables of " << list << ")\n";
  }
  if (!problems.empty() || !order.empty()) Die(kExitUsage, "nothing was started");
  return hosts;
}

RolloutSpec MakeSpec(const RolloutOptions& o) {
  RolloutSpec spec;
  spec.id = RandomId();
  spec.plan_file = o.plan;
  spec.plan_text = ReadPlan(o.plan);
  spec.inventory = o.inventory;
  InventoryResult parsed = ParseInventory(ReadInputFile(o.inventory, "inventory"), o.inventory);
  for (const std::string& e : parsed.errors) std::cerr << e << "\n";
  if (!parsed.inventory) Die(kExitUsage, "invalid inventory " + o.inventory);
  Result<std::vector<InventoryHost>> chosen = LimitHosts(*parsed.inventory, o.limit);
  if (!chosen.ok()) Die(kExitUsage, chosen.status().message());
  std::vector<Count> serial;
  for (const std::string& s : o.serial) {
    Result<Count> c = ParseCount(s, "--serial");
    if (!c.ok()) Die(kExitUsage, c.status().message());
    if (c->value == 0) Die(kExitUsage, "--serial must be at least 1 (or 1%), not '" + s + "'");
    serial.push_back(c.value());
  }
  Result<Count> max_fail = ParseCount(o.max_fail, "--max-fail");
  if (!max_fail.ok()) Die(kExitUsage, max_fail.status().message());
  spec.max_fail = max_fail.value();
  std::optional<std::chrono::milliseconds> after = ParseDuration(o.unreachable_after);
  if (!after || after->count() <= 0)
    Die(kExitUsage, "--unreachable-after expects a duration (e.g. 90s, 10m), not '" +
                        o.unreachable_after + "'");
  spec.unreachable_after_ms = after->count();
  spec.hosts = CheckHosts(o, spec.plan_text, *parsed.inventory, chosen.value());
  spec.plan_name = ParsePlan(spec.plan_text, o.plan, spec.hosts[0].vars).plan->name;
  std::vector<std::string> names;
  for (const RolloutHost& h : spec.hosts) names.push_back(h.name);
  spec.batches = MakeBatches(names, serial);
  return spec;
}

}  // namespace

int Rollout(const RolloutOptions& o, const std::string& coordinator_socket) {
  RolloutSpec spec = MakeSpec(o);
  std::map<std::string, std::string> env;
  bool local = RemoteHost() == nullptr;
  if (local) {
    for (const char* name : kSshEnvironment)
      if (const char* value = std::getenv(name); value && *value) env[name] = value;
  }
  std::string plan = GeneratedPlan(spec, local ? SelfPath() : "deployctl",
                                   local ? coordinator_socket : RemoteSocket(), env);
  Client client(coordinator_socket);
  json::object answer =
      client.Call({{"op", "apply"},
                   {"plan_text", plan},
                   {"plan_file", o.plan},
                   {"vars", json::object{{"rollout", json::serialize(EncodeSpec(spec))}}},
                   {"key", spec.Key()}});
  std::string id = Str(answer, "run");
  if (o.json_out) {
    json::array batches;
    for (const std::vector<std::string>& batch : spec.batches)
      batches.push_back(json::value_from(batch));
    std::cout << json::serialize(json::object{{"run", id},
                                              {"plan_file", spec.plan_file},
                                              {"inventory", spec.inventory},
                                              {"max_fail", spec.max_fail.Text()},
                                              {"batches", batches}})
              << std::endl;
    return kExitOk;
  }
  std::cout << id << "\n";
  std::cout << "rollout of " << spec.plan_file << " over " << spec.hosts.size() << " hosts of "
            << spec.inventory << ", --max-fail " << spec.max_fail.Text() << ":";
  for (size_t b = 0; b < spec.batches.size(); ++b) {
    std::cout << (b ? " |" : "");
    for (const std::string& h : spec.batches[b]) std::cout << " " << h;
  }
  std::cout << std::endl;
  if (!o.wait) return kExitOk;
  std::optional<RolloutRun> rollout = FindRollout(client, id);
  if (!rollout) Die(kExitUsage, "run " + id + " is not a rollout");
  return WatchRollout(client, *rollout);
}

}  // namespace deployd::ctl
