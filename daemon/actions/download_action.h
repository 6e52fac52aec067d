// The `download` action: a Hugging Face repository into a local directory with `hf download`
// (or the older `huggingface-cli download`), run in the action child.
//
// The child is itself a background step under deployd's supervisor: the engine watches the
// bytes under `to` for progress, stops the process group and fires the action again on a stall,
// and applies fail_on to the output. So this code only has to make one attempt well:
//   1. create `to`; with `size` set, refuse to start when the free space under `to` plus what is
//      already there (complete files and .incomplete ones, which resume) is less than `size`;
//   2. sweep stale .lock files left by a killed attempt (huggingface_hub's SoftFileLock
//      fallback waits on them forever, notes §4);
//   3. run the downloader as a child in our process group (the engine's group kill reaches it),
//      stdin /dev/null, stdout and stderr on one pipe, every line relayed through ctx.say (split
//      at '\r' too: tqdm redraws its bars with it). A SIGTERM sent to this process alone is
//      forwarded, so a stop is clean either way;
//   4. exit as the downloader did; a failure names its cause when it is one that retrying cannot
//      fix (gated repository, no space left, a refused resume: notes §5, §7, §8).
// Secrets such as HF_TOKEN reach the downloader only through the inherited environment, never
// its command line (argv is visible to every user in /proc).
//
// Blocking code, for the action child only: it blocks SIGTERM in the calling thread while the
// downloader runs (restored before returning).
#ifndef DEPLOYD_ACTIONS_DOWNLOAD_ACTION_H_
#define DEPLOYD_ACTIONS_DOWNLOAD_ACTION_H_

#include <string>
#include <vector>

#include "actions/builtin_action.h"
#include "deployd/plan.h"
#include "deployd/status.h"

namespace deployd {

// Which downloader `path_env` (a PATH value) offers: "hf" when a directory of it holds an
// executable hf, else "huggingface-cli"; an error naming both (and the PATH searched) when
// neither is there. Empty entries of PATH are skipped.
Result<std::string> ResolveDownloader(const std::string& path_env);

// How a CLI takes several --include (or --exclude) patterns. hf 1.x (typer) wants the flag
// repeated (`--include a --include b`; `--include a b` would make b a file name to download);
// huggingface-cli and hf 0.x (argparse, nargs="*") want one flag and a list (a repeated flag
// keeps only its last list).
enum class PatternSyntax { kRepeated, kList };

// The argv, never a shell line: TOOL download REPO --local-dir TO [--revision R]
// [--include P…] [--exclude P…]. The patterns come last, so a list cannot swallow an argument
// after it. The first form picks the syntax from the tool's name: kRepeated for hf, kList for
// huggingface-cli.
std::vector<std::string> DownloadArgv(const std::string& tool, const DownloadAction& action);
std::vector<std::string> DownloadArgv(const std::string& tool, const DownloadAction& action,
                                      PatternSyntax syntax);

// The syntax of `hf version`'s output ("huggingface_hub version: 0.36.0" → kList, 1.x or
// anything unreadable → kRepeated).
PatternSyntax HfPatternSyntax(const std::string& version_output);

// Removes every *.lock file under DIR/.cache/huggingface (huggingface_hub's metadata for a
// --local-dir download; the hub cache's .locks directory is not used with --local-dir) that no
// process has open: a holder of a flock or of a SoftFileLock keeps its descriptor open, so a
// lock that appears in no /proc/PID/fd was left by a process that is gone. Files are compared by
// device and inode, not by path. Processes whose descriptors cannot be read (another user's,
// when not root) are not seen. Returns the paths removed; symlinks are neither followed nor
// removed; what cannot be removed is left (the downloader's wait then shows up as a stall).
std::vector<std::string> SweepStaleLocks(const std::string& dir);

// Steps 1-4 above. Success says "downloaded REPO into TO: N files, SIZE in 2m03s" (files under
// TO, huggingface_hub's .cache excluded). Errors:
//   not enough space under TO for REPO: needs 600GiB, 120GiB free and 30GiB already there
//   repository ORG/NAME is gated or needs a token: set HF_TOKEN in the plan's secrets: LINE
//   repository ORG/NAME is gated and the token's account has not been granted access: request it at
//   https://huggingface.co/ORG/NAME: LINE repository ORG/NAME was not found (or the token cannot
//   see it): LINE no space left on device under TO (1.2GiB free): LINE hf exited with status 1: the
//   server refused to resume a partial download (416); delete the stale .incomplete files under
//   TO/.cache/huggingface/download and run it again: LINE hf exited with status N: LAST LINE hf was
//   killed by SIGTERM: LAST LINE
// where LINE is the downloader's output line that showed the cause.
Status RunDownloadAction(const DownloadAction& action, const ActionContext& ctx);

}  // namespace deployd

#endif  // DEPLOYD_ACTIONS_DOWNLOAD_ACTION_H_
