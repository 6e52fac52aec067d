// What deployctl reads from its own side before it asks deployd: plan files (and other files
// named on the command line) and --var NAME=VALUE pairs. Each ends deployctl with exit status 2
// and a message when the input is bad.
#ifndef DEPLOYD_CTL_PLAN_INPUT_H_
#define DEPLOYD_CTL_PLAN_INPUT_H_

#include <map>
#include <string>
#include <vector>

namespace deployd::ctl {

// The whole file; `what` names it in the error ("plan", "inventory").
std::string ReadInputFile(const std::string& path, const std::string& what);
inline std::string ReadPlan(const std::string& path) { return ReadInputFile(path, "plan"); }

std::map<std::string, std::string> ParseVars(const std::vector<std::string>& pairs);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_PLAN_INPUT_H_
