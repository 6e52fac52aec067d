// The unit file the `service` action writes when the plan gives `exec`: rendered with the
// settings that keep a model server from leaving orphans, hanging a stop or crash-looping unseen
// (notes §D #26, #27) — Type=exec, KillMode=mixed, TimeoutStopSec from stop_timeout,
// Restart=always with RestartSec and a start limit, CUDA_DEVICE_ORDER=PCI_BUS_ID and
// HF_HUB_OFFLINE=1 — every value quoted for systemd, and installed atomically, only when its
// content changes.
//
// RenderUnitFile and QuoteExecArg are pure; PrepareUnit reads PATH; InstallUnitFile blocks on
// the file system (the `deployd --action` child).
#ifndef DEPLOYD_ACTIONS_SERVICE_UNIT_FILE_H_
#define DEPLOYD_ACTIONS_SERVICE_UNIT_FILE_H_

#include <string>

#include "actions/builtin_action.h"
#include "deployd/plan.h"
#include "deployd/status.h"

namespace deployd {

// The unit file deployd writes for a ServiceAction with `exec` (vLLM-safe defaults). Pure:
// argv[0] is written as given (PrepareUnit resolves a bare name on PATH first, because
// systemd would search only its own fixed directories). Every value is quoted and escaped for
// systemd: `%` as `%%`, `$` as `$$` in ExecStart, C escapes inside double quotes.
std::string RenderUnitFile(const ServiceAction& action);

// One ExecStart= argument as systemd parses it back to `arg` (quoted only when it has to be).
std::string QuoteExecArg(const std::string& arg);

// Checks what the unit file would carry for `unit` (already normalized); returns the action
// with its unit set and exec[0] made absolute. Errors: "exec needs a .service unit, not 'x'",
// "exec: 'vllm' is not on PATH; give its absolute path", "environment: 'A-B' is not a valid
// variable name", ….
Result<ServiceAction> PrepareUnit(const ServiceAction& action, const std::string& unit);

// Writes ctx.unit_dir/<unit> (mode 0644) when its content differs from RenderUnitFile's; true
// when it was written. Says "unit file … unchanged" or "wrote … (ExecStart=… …)".
Result<bool> InstallUnitFile(const ServiceAction& action, const ActionContext& ctx);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_SERVICE_UNIT_FILE_H_
