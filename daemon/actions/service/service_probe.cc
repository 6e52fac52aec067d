#include "actions/service/service_probe.h"

#include <boost/json/array.hpp>
#include <string>
#include <vector>

#include "actions/service/systemctl.h"
#include "actions/service/unit_cgroup.h"
#include "process/process_table.h"

namespace deployd {

CheckOutcome ProbeService(const Check& check) {
  CheckOutcome outcome;
  outcome.attempts = 1;
  outcome.evidence["check"] = "service";
  outcome.evidence["target"] = check.unit;
  auto finish = [&](bool passed, const std::string& what) {
    outcome.passed = passed;
    outcome.summary = "service " + check.unit + ": " + what;
    return outcome;
  };
  if (check.unit_state != "started" && check.unit_state != "stopped") {
    return finish(false, "unknown state '" + check.unit_state + "' (started or stopped)");
  }
  auto unit = NormalizeUnit(check.unit);
  if (!unit.ok()) return finish(false, unit.status().message());
  if (FindOnPath("systemctl").empty()) return finish(false, "systemctl not found on PATH");
  auto st = ShowUnit(*unit, check.timeout);
  if (!st.ok()) {
    outcome.evidence["error"] = st.status().message();
    return finish(false, st.status().message());
  }
  Result<std::vector<pid_t>> cgroup = UnitCgroupProcs(st->control_group);
  std::vector<pid_t> left = cgroup.ok() ? *cgroup : std::vector<pid_t>{};
  boost::json::object& ev = outcome.evidence;
  ev["load_state"] = st->load_state;
  ev["active_state"] = st->active_state;
  ev["sub_state"] = st->sub_state;
  ev["main_pid"] = st->main_pid;
  ev["exec_main_status"] = st->exec_main_status;
  ev["exec_main_code"] = st->exec_main_code;
  ev["unit_file_state"] = st->unit_file_state;
  ev["cgroup"] = st->control_group;
  boost::json::array procs;
  for (pid_t pid : left) {
    auto info = ReadProcess(pid);
    procs.push_back(boost::json::object{{"pid", pid}, {"title", info ? info->Title() : "?"}});
  }
  ev["cgroup_procs"] = std::move(procs);
  if (!cgroup.ok()) ev["cgroup_error"] = cgroup.status().message();

  bool passed = false;
  std::string what;
  if (st->load_state == "not-found" && st->Stopped()) {
    what = "not installed";
    passed = check.unit_state == "stopped";
  } else if (check.unit_state == "started") {
    passed = st->Running();
    what = st->State();
    if (st->main_pid > 0) what += ", main pid " + std::to_string(st->main_pid);
    if (!passed) {
      if (std::string exit = st->MainExit(); !exit.empty()) what += "; " + exit;
    }
  } else {
    passed = st->Stopped() && cgroup.ok() && left.empty();
    what = st->State();
    if (!left.empty()) what += "; " + ProcessCount(left.size()) + " left in its cgroup";
    if (!cgroup.ok()) what += "; " + cgroup.status().message();
  }
  if (check.enabled) {
    bool want = *check.enabled;
    if (st->Enabled() == want) {
      what += want ? ", enabled" : ", not enabled";
    } else {
      std::string file_state = st->unit_file_state.empty() ? "no unit file" : st->unit_file_state;
      what += "; " + file_state + (want ? " (expected enabled)" : " (expected disabled)");
      passed = false;
    }
  }
  return finish(passed, what);
}

}  // namespace deployd
