// Inventory: the hosts of a fleet, read from the file operators already have — Ansible's INI
// or YAML inventory format — so that `deployctl rollout` needs no inventory of its own.
//
// Understood: hosts, groups, `children` (groups of groups), host variables and group variables
// (`[GROUP:vars]`, `vars:`), numeric and alphabetic ranges (`gpu[01:20]`, `db-[a:c]`), the
// implicit groups `all` and `ungrouped`, and the connection variables `ansible_host`,
// `ansible_user` and `ansible_port` (also their old `ansible_ssh_*` names). A host's variables
// are merged as Ansible merges them: `all` first, then its groups from the outermost to the
// innermost (by depth, then by name), then the host's own; the last one set wins. They become
// a plan's `--var`s (rollout.cc keeps those the plan declares).
//
// Which format: `.yaml`, `.yml` and `.json` files are YAML, `.ini` files INI; any other file is
// YAML when it reads as a YAML map, else INI. Every problem is reported as
// "FILE:LINE: error: MESSAGE" (YAML adds the column); all of them, not only the first.
//
// Pure: reads one file, no I/O beyond it.
#ifndef DEPLOYD_CTL_INVENTORY_H_
#define DEPLOYD_CTL_INVENTORY_H_

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/status.h"

namespace deployd::ctl {

// A variable's value as written, and where (for messages about it).
struct InventoryValue {
  std::string text;
  int line = 0;
  // "" when the value is a scalar; else why it cannot be a plan variable ("a list").
  std::string not_scalar;
};

using InventoryVars = std::map<std::string, InventoryValue>;

struct InventoryHost {
  std::string name;              // the inventory hostname
  int line = 0;                  // where it first appears
  InventoryVars vars;            // merged: groups by precedence, then its own
  std::set<std::string> groups;  // every group it belongs to, ancestors and `all` included
};

struct Inventory {
  std::string file;
  std::vector<InventoryHost> hosts;  // in the order they first appear
  std::set<std::string> groups;      // every group name, `all` and `ungrouped` included
};

// Reads `text` (the contents of `file`); every problem, formatted, when it is not an inventory.
struct InventoryResult {
  std::optional<Inventory> inventory;
  std::vector<std::string> errors;  // "FILE:LINE: error: …"
};
InventoryResult ParseInventory(std::string_view text, const std::string& file);

// Ansible's host patterns: names and globs of hosts or groups (`gpu*`, `all`, `*`), joined by
// `:` or `,` (union), with `&` (intersection) and `!` (exclusion) before a term:
// `kimi:&rack1:!gpu07`. The hosts, in inventory order; an error names a pattern that is not
// understood, or one that leaves no host.
Result<std::vector<InventoryHost>> LimitHosts(const Inventory& inventory, std::string_view pattern);

// The host's `ssh://` address from its connection variables (ansible_host, else its name;
// ansible_user; ansible_port), or why there is none ("FILE:LINE: error: host 'h1': …").
Result<std::string> HostAddress(const InventoryHost& host, const std::string& file);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_INVENTORY_H_
