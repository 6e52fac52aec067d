// The probes of the checks that look at files and disks: `file` (exists, absent, at least a
// size), `disk_free` (free space where a path is, crediting what a resumed download already
// has), and `weights_complete` without sha256 (weights_check.h, a few KiB read per shard).
// Synchronous, and quick enough for the daemon's io_context thread; a weights_complete with
// sha256, which reads every byte, runs in the probe child instead (probe_in_child.h).
#ifndef DEPLOYD_CHECKS_FILE_PROBES_H_
#define DEPLOYD_CHECKS_FILE_PROBES_H_

#include "checks/checks.h"
#include "deployd/plan.h"

namespace deployd {

CheckOutcome ProbeFile(const Check& check);
CheckOutcome ProbeDiskFree(const Check& check);
// REQUIRES: check.sha256 is empty.
CheckOutcome ProbeWeights(const Check& check);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_FILE_PROBES_H_
