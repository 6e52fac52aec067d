// InventoryBuilder: what the INI and the YAML readers of an inventory (inventory.h) share.
// Each reader declares groups, hosts, their variables and children as it meets them; Finish()
// checks the whole (a group that contains itself), merges each host's variables in Ansible's
// order of precedence, and formats the problems. Internal to inventory_*.cc.
#ifndef DEPLOYD_CTL_INVENTORY_BUILDER_H_
#define DEPLOYD_CTL_INVENTORY_BUILDER_H_

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "ctl/inventory.h"

namespace deployd::ctl {

class InventoryBuilder {
 public:
  explicit InventoryBuilder(std::string file);

  // `column` 0: none (INI reports lines only).
  void Error(int line, int column, const std::string& message);
  bool failed() const { return !errors_.empty(); }

  // Declares a group (again is fine); `all` and `ungrouped` always exist.
  void Group(const std::string& name, int line);
  void GroupVar(const std::string& group, const std::string& key, InventoryValue value);
  void Child(const std::string& parent, const std::string& child, int line);
  // Adds a host to a group ("" or `all`: ungrouped), with variables of its own.
  void Host(const std::string& group, const std::string& host, int line, InventoryVars vars);

  InventoryResult Finish();

 private:
  struct GroupData {
    int line = 0;
    InventoryVars vars;
    std::vector<std::string> children;
  };
  struct HostData {
    int line = 0;
    InventoryVars vars;
    std::vector<std::string> groups;  // where it was listed
  };
  // False when a group below `name` (or itself) contains itself, reported; `done` holds the
  // groups already walked.
  bool NoCycle(const std::string& name, std::set<std::string>& done,
               std::vector<std::string>& path);
  // Fills `depth` (the longest path from `all`) of the groups below `name`.
  void Depths(const std::string& name, std::map<std::string, int>& depth);

  std::string file_;
  std::vector<std::string> errors_;
  std::map<std::string, GroupData> groups_;
  std::vector<std::string> host_order_;
  std::map<std::string, HostData> hosts_;
  bool too_many_ = false;  // kMaxInventoryHosts reached: said once
};

// An inventory names at most this many hosts, ranges expanded: a fleet, not what a typo in a
// range (`gpu[1:100][1:100]`) makes of a file. Beyond it the inventory is refused.
inline constexpr size_t kMaxInventoryHosts = 10000;

// Ansible's ranges in a host name: "gpu[01:03]" is gpu01, gpu02, gpu03 (the width of the first
// bound is kept), "db-[a:c]" is db-a, db-b, db-c, "n[0:10:5]" steps by 5. Several ranges
// multiply, up to kMaxInventoryHosts names. A name without '[' is itself.
Result<std::vector<std::string>> ExpandHostRange(std::string_view name);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_INVENTORY_BUILDER_H_
