#include "ctl/plan_input.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ctl/ctl_client.h"
#include "deployd/protocol.h"

namespace deployd::ctl {

std::string ReadInputFile(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) Die(kExitUsage, "cannot read " + what + " " + path + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::map<std::string, std::string> ParseVars(const std::vector<std::string>& pairs) {
  std::map<std::string, std::string> vars;
  for (const auto& p : pairs) {
    auto eq = p.find('=');
    if (eq == std::string::npos || eq == 0)
      Die(kExitUsage, "--var expects NAME=VALUE, got '" + p + "'");
    vars[p.substr(0, eq)] = p.substr(eq + 1);
  }
  return vars;
}

}  // namespace deployd::ctl
