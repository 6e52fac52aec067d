// The plan model: what a plan file (format v1, DESIGN.md §2) says once it has been parsed,
// validated and had its ${variables} substituted. Every value here is final; nothing downstream
// re-parses strings. Plain data, no behaviour beyond the kinds' names; safe to copy between
// threads (there is one).
#ifndef DEPLOYD_PLAN_H_
#define DEPLOYD_PLAN_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace deployd {

using Duration = std::chrono::milliseconds;

// Where a value came from in the plan file; 1-based. line == 0 means unknown.
struct SourcePos {
  int line = 0;
  int column = 0;
};

// What to execute. A string in the plan runs through `/bin/sh -c`; a list is an argv and no
// shell is involved.
struct Command {
  bool shell = false;
  std::string script;             // when shell
  std::vector<std::string> argv;  // when !shell; argv[0] is looked up on PATH if it has no '/'

  // The argv actually executed: {"/bin/sh", "-c", script} or argv.
  std::vector<std::string> Argv() const {
    if (shell) return {"/bin/sh", "-c", script};
    return argv;
  }
};

enum class CheckKind {
  kRun,
  kHttp,
  kTcp,
  kFile,
  kCommand,
  kDiskFree,
  kPortFree,
  kWeightsComplete,
  kService,
  kProcess,
  kGpusFree,
  kBenchmark,
};

// The names a plan writes a kind with (`http:`, `download:`); messages and JSON use the same
// names. ToString gives "unknown" for a value outside the enum.
std::string_view ToString(CheckKind kind);
std::optional<CheckKind> ParseCheckKind(std::string_view name);

// `http` JSON expectation: the value(s) at a dotted path ("data.*.id"; `*` fans out over an
// array's elements or an object's members, a number indexes an array) must equal `value`, or
// contain it (a substring of a string, an element of an array). Passes when any selected value
// does.
struct JsonExpectation {
  std::string path;
  enum class Op { kEquals, kContains } op = Op::kEquals;
  std::string value;  // compared with a string as is, with a number/bool by its JSON text
};

// Which GPUs, and how much memory each may still show as used (the driver reserves some).
struct GpuSelection {
  std::vector<int> gpus;  // indices in PCI bus order (nvidia-smi's); empty = every GPU
  std::uint64_t max_used = 1ull << 30;
};

// `benchmark` `expect:`: one more completion, of a fixed prompt at temperature 0, whose text
// must match a pattern or equal an answer: the "fast but incoherent" server fails here.
struct BenchmarkExpect {
  std::string prompt;
  std::string matches;                // RE2, searched in the answer; or
  std::optional<std::string> equals;  // the answer, leading and trailing whitespace left out
  int max_tokens = 16;
};

// `benchmark`: streamed completions from an OpenAI-compatible server (vLLM, SGLang, llama.cpp's
// server), measured — output tokens/s, time to first token, inter-token latency, errors — and
// judged against absolute bounds and against the last succeeded run of the same plan.
struct BenchmarkSpec {
  std::string url;  // the endpoint: http://HOST:PORT/v1/completions (or /v1/chat/completions)
  std::string model;
  bool chat = false;                 // `api: chat`: messages in, delta.content out
  std::vector<std::string> prompts;  // cycled over the requests; empty: prompt_tokens words
  int prompt_tokens = 128;
  int max_tokens = 128;
  int requests = 8;
  int concurrency = 1;
  bool ignore_eos = false;
  // `at_least` and `at_most`: unset bounds are not judged.
  std::optional<double> min_tokens_per_s;          // aggregate over the benchmark
  std::optional<double> min_request_tokens_per_s;  // the slowest request
  std::optional<Duration> max_ttft_p50;
  std::optional<Duration> max_ttft_p95;
  std::optional<Duration> max_itl_p50;
  std::optional<Duration> max_itl_p95;
  int max_errors = 0;
  // `regression`: how much worse than the baseline a figure may be, as a fraction (0.1 = 10%).
  std::optional<double> regression_tokens_per_s;
  std::optional<double> regression_ttft_p95;
  std::optional<BenchmarkExpect> expect;
};

// A probe that passes or fails. The same kinds serve in preflight, verify and skip_if.
// Only the fields of `kind` are meaningful.
struct Check {
  CheckKind kind = CheckKind::kRun;
  SourcePos pos;

  // run: exit status 0, and the output (stdout and stderr) matching these when given.
  Command command;
  std::string output_matches;    // a pattern (RE2) searched in the output; empty = none
  std::string version_at_least;  // the first version-like token of the output must be >= this
  std::string version_below;     // … and < this (PEP 440 order: 0.16.0rc2.dev313 < 0.16.0)
  std::map<std::string, std::string> env;

  // http
  std::string url;                    // http://host[:port]/path
  std::string method = "GET";         // GET or POST
  std::string body;                   // JSON text sent with POST (content-type application/json)
  int status = 200;                   // expected status code
  std::string body_contains;          // substring the body must contain; empty = none
  std::vector<JsonExpectation> json;  // the body parsed as JSON must meet each

  // tcp and port_free
  std::string host;  // tcp: host to connect to; port_free: address to bind
  int port = 0;

  // file, disk_free and weights_complete: `path`; command: `name`
  std::string path;
  bool absent = false;  // file: pass when the path does not exist
  std::optional<std::uint64_t> min_size;
  std::string name;
  std::uint64_t at_least = 0;    // disk_free: bytes available to unprivileged users
  bool credit_existing = false;  // disk_free: bytes already under `path` count as available
  std::vector<std::string> alternatives;      // command: other names that will do (huggingface-cli)
  std::map<std::string, std::string> sha256;  // weights_complete: file (relative) -> hex digest

  // service: the unit's state ("started": active and running; "stopped": inactive or failed,
  // and no process left in its cgroup), and whether it is enabled when given.
  std::string unit;
  std::string unit_state = "started";
  std::optional<bool> enabled;

  // process: processes whose command line or title (VLLM::Worker_TP0) matches `match` exist
  // (or, with `absent`, none does). Uses `match` and `absent`.
  std::string match;

  // gpus_free
  GpuSelection gpu;

  // benchmark (only in a step's verify)
  BenchmarkSpec benchmark;

  // Timing (DESIGN.md §1 "Verify"): wait `after`, then try every `every` until it passes or
  // `within` has elapsed since the first try. Without `within` the check is tried once.
  Duration after{0};
  Duration every{std::chrono::seconds(1)};
  std::optional<Duration> within;
  Duration timeout{std::chrono::seconds(10)};  // bound on one attempt
};

struct FailPattern {
  std::string pattern;  // RE2 syntax; "(?i)" makes it case-insensitive
  SourcePos pos;
  std::string explanation;  // from a named set (`fail_on: vllm`): what the line means
  bool fatal = false;       // no retry can fix it: the step fails without further attempts
  std::string set;          // the named set it came from ("vllm"), or what implied it
  // The kernel writes these lines (GPU faults), not the action: they are also matched against
  // the kernel's messages while the step runs and verifies (engine/kernel_log_follower.h).
  bool kernel = false;
};

// What a stalled step does: fail at once, or stop its process group and fire the action again
// (bounded by the step's `retries`).
enum class OnStall { kFail, kRestart };

// `watch.progress`: the step must keep making progress — bytes under `path` growing, or a
// progress line in its output advancing — or it is stalled after `stall_after`.
struct ProgressSpec {
  std::string path;  // empty: only progress lines in the output count
  Duration stall_after{std::chrono::minutes(10)};
  Duration every{std::chrono::seconds(5)};  // sampling interval; < stall_after
  std::optional<std::uint64_t> total;       // expected bytes under `path` when complete
  SourcePos pos;
};

struct Watch {
  std::vector<FailPattern> fail_on;
  std::optional<ProgressSpec> progress;
  OnStall on_stall = OnStall::kFail;
};

// The built-in actions (DESIGN.md §1 "Action"). Each is idempotent: firing it again after an
// interruption converges to the same state. They run in a child process (deployd --action),
// never on the daemon's thread.
enum class ActionKind { kRun, kApproval, kService, kKill, kGpusFree, kRemove, kDownload };

std::string_view ToString(ActionKind kind);
std::optional<ActionKind> ParseActionKind(std::string_view name);

// `service`: a systemd unit brought to a state. With `exec` deployd writes the unit file
// itself (vLLM-safe defaults) before `daemon-reload`.
struct ServiceAction {
  std::string unit;   // "kimi.service"
  std::string state;  // started | stopped | restarted | "" (leave running state)
  std::optional<bool> enabled;
  std::vector<std::string> exec;  // ExecStart argv; empty = the unit file exists already
  std::map<std::string, std::string> environment;  // added to the defaults
  std::string user;
  std::string working_directory;
  std::string description;
  Duration stop_timeout{std::chrono::seconds(120)};  // TimeoutStopSec
  Duration start_timeout{std::chrono::seconds(90)};  // bound on systemctl start itself
};

// `kill`: processes whose command line or title matches, with their process groups;
// SIGTERM, `grace`, SIGKILL, proven gone.
struct KillAction {
  std::string match;  // a pattern (RE2 syntax)
  Duration grace{std::chrono::seconds(10)};
  bool whole_groups = true;
};

// `gpus_free`: the listed GPUs have no compute process and little memory used, on every read
// for `stable_for`; with `kill`, the processes holding them are stopped first as `kill` does.
struct GpusFreeAction {
  GpuSelection gpu;
  Duration stable_for{std::chrono::seconds(5)};
  Duration every{std::chrono::seconds(1)};   // how often the GPU state is read
  Duration within{std::chrono::minutes(2)};  // give up after this
  bool kill = false;
  Duration grace{std::chrono::seconds(30)};
};

// `remove`: a guarded delete of one path (guarded_remove.h).
struct RemoveAction {
  std::string path;
};

// `download`: a Hugging Face repository into `to` with `hf download` (or `huggingface-cli`).
struct DownloadAction {
  std::string repo;
  std::string to;
  std::string revision;
  std::vector<std::string> include;
  std::vector<std::string> exclude;
  std::optional<std::uint64_t> size;  // expected total: ETA and the preflight disk check
};

// `secrets:` entry: where a value is read at fire time. Never stored, never logged.
struct SecretSource {
  std::string name;  // the child's environment variable
  std::string file;  // absolute path, not readable by others; or
  std::string env;   // a variable of deployd's environment
  SourcePos pos;
};

struct Step {
  std::string id;  // unique in the plan, [a-z0-9_-]+
  SourcePos pos;

  ActionKind kind = ActionKind::kRun;
  Command run;
  ServiceAction service;
  KillAction kill;
  GpusFreeAction gpus_free;
  RemoveAction remove;
  DownloadAction download;
  std::vector<std::string> secrets;  // names from the plan's `secrets:` this step's child gets
  // Set for an approval step: instead of running a command the step waits (state `waiting`)
  // until `deployctl approve`; this message tells the operator what to check first.
  std::optional<std::string> approval;
  bool background = false;  // start detached; verify while it runs; it outlives the step
  std::map<std::string, std::string> env;    // added to the daemon's environment
  std::string cwd;                           // empty = the daemon's working directory
  std::optional<Duration> timeout;           // foreground only: SIGTERM the group, then SIGKILL
  Duration grace{std::chrono::seconds(10)};  // SIGTERM → SIGKILL
  int retries = 0;                           // extra attempts after the first
  Duration retry_delay{std::chrono::seconds(1)};  // doubled after each failed attempt
  std::vector<Check> verify;
  std::vector<Check> skip_if;
  Watch watch;
  bool idempotent = false;  // safe to fire again after an interruption

  int max_attempts() const { return retries + 1; }
};

struct Plan {
  int version = 1;
  std::string name;
  std::string description;
  // One run at a time holds a lock: the plan's own name unless `lock:` names one shared with
  // other plans (the GPUs of a host, say).
  std::string lock;
  std::map<std::string, std::string> vars;  // final values, after --var overrides
  std::vector<SecretSource> secrets;
  std::vector<Check> preflight;
  std::vector<Step> steps;
  std::vector<Step> on_failure;
};

}  // namespace deployd

#endif  // DEPLOYD_PLAN_H_
