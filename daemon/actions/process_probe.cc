#include "actions/process_probe.h"

#include <boost/json/array.hpp>
#include <string>
#include <vector>

#include "process/process_kill.h"

namespace deployd {
namespace {

namespace json = boost::json;

constexpr size_t kProbeNamesShown = 5;
constexpr size_t kEvidenceProcesses = 20;
constexpr size_t kEvidenceCommandChars = 256;

std::string Excerpt(const std::string& text, size_t max) {
  return text.size() <= max ? text : text.substr(0, max) + "…";
}

}  // namespace

CheckOutcome ProbeProcess(const Check& check) {
  CheckOutcome outcome;
  std::string subject = "process '" + check.match + "'";
  outcome.evidence["check"] = "process";
  outcome.evidence["target"] = "'" + check.match + "'";
  KillOptions options;
  options.pattern = check.match;
  options.whole_groups = false;
  Result<KillPlan> plan = KillPlan::Select(options);
  if (!plan.ok()) {
    outcome.summary = subject + ": " + plan.status().message();
    outcome.evidence["error"] = plan.status().message();
    return outcome;
  }
  // Survivors(): the matches still running now (one may have exited since /proc was read).
  std::vector<Survivor> running = plan->Survivors();
  json::array processes;
  std::string names;
  for (size_t i = 0; i < running.size(); ++i) {
    const KillTarget& t = running[i].target;
    if (i < kProbeNamesShown) names += (i == 0 ? "" : ", ") + t.Name();
    if (i < kEvidenceProcesses) {
      processes.push_back(
          json::object{{"pid", t.pid},
                       {"title", t.title},
                       {"command_line", Excerpt(t.command_line, kEvidenceCommandChars)},
                       {"state", std::string(1, running[i].state)}});
    }
  }
  if (running.size() > kProbeNamesShown) {
    names += " and " + std::to_string(running.size() - kProbeNamesShown) + " more";
  }
  json::array excluded;
  for (const ExcludedProcess& e : plan->excluded()) {
    excluded.push_back(
        json::object{{"pid", e.process.pid}, {"title", e.process.title}, {"why", e.why}});
  }
  outcome.evidence["count"] = running.size();
  outcome.evidence["processes"] = std::move(processes);
  outcome.evidence["excluded"] = std::move(excluded);
  outcome.evidence["absent"] = check.absent;
  outcome.passed = check.absent == running.empty();
  outcome.summary = subject + ": " +
                    (running.empty() ? std::string("none running")
                                     : std::to_string(running.size()) + " running: " + names);
  return outcome;
}

}  // namespace deployd
