// Ansible inventories as `deployctl rollout --inventory` reads them (ctl/inventory.h): the
// first byte picks the file's name, and with it the format (INI, YAML, or guessed); the rest
// is the file. An inventory that parses has each host's address made and is limited by the
// patterns `all`, `*` and a pattern of the rollout kind.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ctl/inventory.h"

using namespace deployd;
using namespace deployd::ctl;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  static const char* const kNames[] = {"hosts.ini", "hosts.yaml", "hosts"};
  const std::string file = kNames[data[0] % 3];
  std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  InventoryResult result = ParseInventory(text, file);
  if (!result.inventory) return 0;
  for (const InventoryHost& host : result.inventory->hosts) (void)HostAddress(host, file);
  for (const char* pattern : {"all", "*", "gpu*:&rack1:!gpu07"})
    (void)LimitHosts(*result.inventory, pattern);
  return 0;
}
