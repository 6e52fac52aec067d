// Ansible inventories (ctl/inventory.h): both formats read into the same hosts, groups and
// merged variables; every problem pinned with its FILE:LINE.
#include "ctl/inventory.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace deployd;
using namespace deployd::ctl;

namespace {

const char* kIni = R"(# the fleet
gpu-spare ansible_host=10.1.230.180

[kimi]
gpu[01:03] ansible_user=root
gpu04:2222 cuda_visible_devices="0,1,2,3"   # the small one

[kimi:vars]
model_dir = /shared/kimi
port=8000

[rack1]
gpu01
gpu04

[rack1:vars]
port=8001

[serving:children]
kimi

[serving:vars]
model_dir=/srv/models
tier=serving

[all:vars]
tier=lab
)";

const char* kYaml = R"(all:
  hosts:
    gpu-spare: {ansible_host: 10.1.230.180}
  vars:
    tier: lab
  children:
    serving:
      vars: {model_dir: /srv/models, tier: serving}
      children:
        kimi:
          hosts:
            gpu[01:03]: {ansible_user: root}
            gpu04: {ansible_port: 2222, cuda_visible_devices: "0,1,2,3"}
          vars:
            model_dir: /shared/kimi
            port: 8000
    rack1:
      hosts:
        gpu01:
        gpu04:
      vars: {port: 8001}
)";

Inventory Must(const char* text, const std::string& file) {
  InventoryResult r = ParseInventory(text, file);
  std::string errors;
  for (const auto& e : r.errors) errors += e + "\n";
  INFO(errors);
  REQUIRE(r.errors.empty());
  REQUIRE(r.inventory.has_value());
  return *r.inventory;
}

std::vector<std::string> Errors(const char* text, const std::string& file) {
  InventoryResult r = ParseInventory(text, file);
  CHECK_FALSE(r.inventory.has_value());
  return r.errors;
}

std::string VarOf(const InventoryHost& h, const std::string& key) {
  auto it = h.vars.find(key);
  return it == h.vars.end() ? "(unset)" : it->second.text;
}

std::vector<std::string> Names(const std::vector<InventoryHost>& hosts) {
  std::vector<std::string> names;
  for (const auto& h : hosts) names.push_back(h.name);
  return names;
}

void CheckTheFleet(const Inventory& inv) {
  REQUIRE(Names(inv.hosts) ==
          std::vector<std::string>{"gpu-spare", "gpu01", "gpu02", "gpu03", "gpu04"});
  const InventoryHost& spare = inv.hosts[0];
  CHECK(spare.groups == std::set<std::string>{"all", "ungrouped"});
  CHECK(VarOf(spare, "tier") == "lab");
  CHECK(VarOf(spare, "model_dir") == "(unset)");
  CHECK(HostAddress(spare, inv.file).value() == "ssh://10.1.230.180");

  const InventoryHost& gpu01 = inv.hosts[1];
  CHECK(gpu01.groups == std::set<std::string>{"all", "kimi", "rack1", "serving"});
  // all < serving (depth 1) = rack1 (depth 1, later by name) < kimi (depth 2) < the host.
  CHECK(VarOf(gpu01, "tier") == "serving");
  CHECK(VarOf(gpu01, "model_dir") == "/shared/kimi");
  CHECK(VarOf(gpu01, "port") == "8000");
  CHECK(HostAddress(gpu01, inv.file).value() == "ssh://root@gpu01");

  const InventoryHost& gpu03 = inv.hosts[3];
  CHECK(gpu03.groups == std::set<std::string>{"all", "kimi", "serving"});
  CHECK(VarOf(gpu03, "port") == "8000");

  const InventoryHost& gpu04 = inv.hosts[4];
  CHECK(VarOf(gpu04, "cuda_visible_devices") == "0,1,2,3");
  CHECK(HostAddress(gpu04, inv.file).value() == "ssh://gpu04:2222");
  CHECK(inv.groups == std::set<std::string>{"all", "kimi", "rack1", "serving", "ungrouped"});
}

}  // namespace

TEST_CASE("an INI inventory: groups, children, ranges, and variables by precedence",
          "[inventory]") {
  CheckTheFleet(Must(kIni, "hosts.ini"));
}

TEST_CASE("the same inventory in YAML reads the same", "[inventory]") {
  CheckTheFleet(Must(kYaml, "hosts.yml"));
  // Without a telling extension, the content decides.
  CheckTheFleet(Must(kYaml, "hosts"));
  CheckTheFleet(Must(kIni, "hosts"));
}

TEST_CASE("problems in an INI inventory, with FILE:LINE", "[inventory]") {
  CHECK(Errors("[kimi\ngpu1\n", "h.ini") ==
        std::vector<std::string>{"h.ini:1: error: invalid section header '[kimi' (expected "
                                 "[GROUP], [GROUP:vars] or [GROUP:children])"});
  CHECK(Errors("[kimi:hosts]\ngpu1\n", "h.ini") ==
        std::vector<std::string>{"h.ini:1: error: section '[kimi:hosts]' has an unknown type "
                                 "'hosts' (expected [GROUP], [GROUP:vars] or [GROUP:children])"});
  CHECK(Errors("gpu1\n[kimi:vars]\nport\n", "h.ini") ==
        std::vector<std::string>{"h.ini:3: error: expected KEY=VALUE in [kimi:vars], not 'port'"});
  CHECK(Errors("gpu1 port\ngpu2:22x\ngpu3 a=\"b\n", "h.ini") ==
        std::vector<std::string>{"h.ini:1: error: host 'gpu1': 'port' is not KEY=VALUE",
                                 "h.ini:2: error: invalid port '22x' in 'gpu2:22x'",
                                 "h.ini:3: error: unterminated quote in 'gpu3 a=\"b'"});
  CHECK(Errors("gpu[03:01]\ngpu[1-3]\n", "h.ini") ==
        std::vector<std::string>{
            "h.ini:1: error: invalid range in 'gpu[03:01]': the first bound is above the last "
            "(expected e.g. gpu[01:20] or db-[a:c])",
            "h.ini:2: error: invalid range in 'gpu[1-3]': no ':' between the bounds (expected "
            "e.g. gpu[01:20] or db-[a:c])"});
  CHECK(Errors("[a:children]\nb\n[b:children]\na\n[a]\ngpu1\n", "h.ini") ==
        std::vector<std::string>{"h.ini:1: error: group 'a' contains itself (a → b → a)"});
  CHECK(Errors("# nothing\n", "h.ini") ==
        std::vector<std::string>{"h.ini: error: no hosts in the inventory"});
}

TEST_CASE("an inventory names at most 10000 hosts, ranges expanded", "[inventory]") {
  const std::string range = " (expected e.g. gpu[01:20] or db-[a:c])";
  CHECK(Errors("gpu[0:10000]\n", "h.ini") ==
        std::vector<std::string>{"h.ini:1: error: invalid range in 'gpu[0:10000]': it names "
                                 "more than 10000 hosts" +
                                 range});
  // Ranges multiply: 100 × 101.
  CHECK(Errors("n[1:100]-[0:100]\n", "h.ini") ==
        std::vector<std::string>{"h.ini:1: error: invalid range in 'n[1:100]-[0:100]': it names "
                                 "more than 10000 hosts" +
                                 range});
  // Lines that add up: the one past the limit is named, once.
  CHECK(Errors("a[1:5000]\nb[1:5000]\nc1\nc2\n", "h.ini") ==
        std::vector<std::string>{"h.ini:3: error: more than 10000 hosts"});
  InventoryResult whole = ParseInventory("gpu[1:10000]\n", "h.ini");
  REQUIRE(whole.inventory);
  CHECK(whole.inventory->hosts.size() == 10000);
}

TEST_CASE("problems in a YAML inventory, with FILE:LINE:COL", "[inventory]") {
  CHECK(Errors("all:\n  hosts: [gpu1]\n", "h.yml") ==
        std::vector<std::string>{"h.yml:2:10: error: 'hosts' of group 'all' must be a map of "
                                 "host names (to their variables, or nothing)"});
  CHECK(Errors("all:\n  host:\n    gpu1:\n", "h.yml") ==
        std::vector<std::string>{"h.yml:2:3: error: unknown key 'host' in group 'all' (expected "
                                 "hosts, vars or children)"});
  CHECK(Errors("all:\n  hosts:\n    gpu1: 3\n", "h.yml") ==
        std::vector<std::string>{"h.yml:3:11: error: host 'gpu1' must map to its variables (a "
                                 "map) or nothing"});
  CHECK(Errors("all:\n  hosts: {gpu1: {a: 1}\n", "h.yml")
            .at(0)
            .starts_with("h.yml:3:1: error: invalid YAML: "));
  CHECK(Errors("- gpu1\n", "h.yaml") ==
        std::vector<std::string>{"h.yaml: error: a YAML inventory is a map of groups (e.g. all: "
                                 "{hosts: {gpu1: }})"});
  CHECK(Errors("kimi: 7\n", "h.yaml") ==
        std::vector<std::string>{
            "h.yaml:1:7: error: group 'kimi' must be a map of hosts, vars and children"});
  // A list is a variable of Ansible's, but not one a plan can take: said when it is used.
  Inventory inv = Must("all:\n  hosts:\n    gpu1: {gpus: [0, 1]}\n", "h.yml");
  CHECK(inv.hosts[0].vars.at("gpus").not_scalar == "a list");
  CHECK(inv.hosts[0].vars.at("gpus").line == 3);
}

TEST_CASE("connection variables give the ssh address, or say what is wrong", "[inventory]") {
  Inventory inv = Must(
      "a ansible_host=10.0.0.1 ansible_user=ops ansible_port=2200\n"
      "b ansible_ssh_host=fd00::2\n"
      "c ansible_port=99999\n"
      "d ansible_connection=local\n"
      "e ansible_host='x y'\n",
      "h.ini");
  CHECK(HostAddress(inv.hosts[0], inv.file).value() == "ssh://ops@10.0.0.1:2200");
  CHECK(HostAddress(inv.hosts[1], inv.file).value() == "ssh://[fd00::2]");
  CHECK(HostAddress(inv.hosts[2], inv.file).status().message() ==
        "h.ini:3: error: host 'c': ansible_port must be a port number (1 to 65535), not '99999'");
  CHECK(HostAddress(inv.hosts[3], inv.file).status().message() ==
        "h.ini:4: error: host 'd': ansible_connection 'local' is not supported (deployctl "
        "reaches hosts with ssh)");
  CHECK(HostAddress(inv.hosts[4], inv.file).status().message() ==
        "h.ini:5: error: host 'e': 'ssh://x y' is not an ssh address (the host holds odd "
        "characters; expected ssh://[USER@]HOST[:PORT])");
}

TEST_CASE("limit patterns: Ansible's host patterns", "[inventory]") {
  Inventory inv = Must(kIni, "hosts.ini");
  auto limit = [&](const char* pattern) { return Names(LimitHosts(inv, pattern).value()); };
  using V = std::vector<std::string>;
  CHECK(limit("") == V{"gpu-spare", "gpu01", "gpu02", "gpu03", "gpu04"});
  CHECK(limit("all") == limit(""));
  CHECK(limit("rack1") == V{"gpu01", "gpu04"});
  CHECK(limit("gpu0[23]") == V{"gpu02", "gpu03"});
  CHECK(limit("rack1,gpu-spare") == V{"gpu-spare", "gpu01", "gpu04"});
  CHECK(limit("kimi:&rack1") == V{"gpu01", "gpu04"});
  CHECK(limit("serving:!rack1") == V{"gpu02", "gpu03"});
  CHECK(limit("!kimi") == V{"gpu-spare"});
  CHECK(LimitHosts(inv, "kimmi").status().message() ==
        "--limit: 'kimmi' matches no host or group of hosts.ini");
  CHECK(LimitHosts(inv, "rack1:&ungrouped").status().message() ==
        "--limit 'rack1:&ungrouped' leaves no host of hosts.ini");
  CHECK(LimitHosts(inv, "~gpu0.*").status().message() ==
        "--limit: '~gpu0.*': regular expressions (~) and retry files (@) are not supported; use "
        "names and globs (*, ?, [..])");
}
