// The processes in a systemd unit's cgroup, read from the cgroup hierarchy this host really
// has: the proof behind "no process left in its cgroup".
//
// systemd's ControlGroup= is a path inside a hierarchy. Where that hierarchy is mounted is read
// from /proc/self/mountinfo, never assumed: the cgroup2 mount (cgroup v2: /sys/fs/cgroup;
// hybrid, as on Ubuntu <= 20.04 and RHEL 8: /sys/fs/cgroup/unified), else the cgroup v1
// hierarchy named systemd (legacy: /sys/fs/cgroup/systemd). $DEPLOYD_CGROUP_ROOT, when set,
// names the hierarchy's directory instead (the systemctl stand-in's simulated cgroups).
//
// The proof is strict: a cgroup.procs that cannot be read while ControlGroup= is set is an
// error, never "empty". Only a cgroup directory that is gone while its parent is there counts as
// empty: a cgroup with processes in it cannot be removed.
#ifndef DEPLOYD_ACTIONS_SERVICE_UNIT_CGROUP_H_
#define DEPLOYD_ACTIONS_SERVICE_UNIT_CGROUP_H_

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "deployd/status.h"

namespace deployd {

// The directory of `control_group` ("/system.slice/kimi.service") in the hierarchy that
// `mountinfo` (the text of /proc/self/mountinfo) shows. A mount whose root is not "/" (a
// container without a cgroup namespace) shows only the cgroups under its root. Errors:
//   "no cgroup2 or name=systemd cgroup hierarchy is mounted (/proc/self/mountinfo)"
//   "the cgroup /x.slice/y.service is outside every cgroup mount (cgroup2 at /sys/fs/cgroup
//    shows /docker/1f2e)"
Result<std::string> CgroupDirectory(std::string_view mountinfo, const std::string& control_group);

// The live processes of the cgroup at `dir` (its cgroup.procs; zombies are left out). Errors:
// "cannot read /sys/fs/cgroup/x/cgroup.procs: Permission denied".
Result<std::vector<pid_t>> ReadCgroupProcs(const std::string& dir);

// The live processes in the cgroup systemd reports for a unit (ControlGroup=, "" when it has
// none: then there are none), on this host.
Result<std::vector<pid_t>> UnitCgroupProcs(const std::string& control_group);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_SERVICE_UNIT_CGROUP_H_
