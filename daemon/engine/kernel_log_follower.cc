#include "engine/kernel_log_follower.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <iterator>
#include <vector>

#include "process/child_process.h"
#include "util/journal_entry.h"

namespace deployd {

struct KernelLogFollower::State {
  Options options;
  LineHandler on_line;
  bool stopped = false;
  bool warned = false;  // about a line that was not an entry
  std::shared_ptr<ChildProcess> child;
};

KernelLogFollower::KernelLogFollower(std::shared_ptr<State> state) : state_(std::move(state)) {}

KernelLogFollower::~KernelLogFollower() { Stop(); }

Result<std::unique_ptr<KernelLogFollower>> KernelLogFollower::Start(boost::asio::any_io_executor ex,
                                                                    const Options& options,
                                                                    LineHandler on_line) {
  auto state = std::make_shared<State>();
  state->options = options;
  state->on_line = std::move(on_line);
  SpawnOptions spawn;
  spawn.argv = {"journalctl", "-k",        "-q",      "--no-pager",
                "-f",         "--no-tail", "--since", JournalTime(options.fired_at_ms)};
  spawn.argv.insert(spawn.argv.end(), std::begin(kJournalJsonArgs), std::end(kJournalJsonArgs));
  spawn.rewrite_line = [state](std::string_view line) -> std::optional<std::string> {
    std::optional<JournalEntry> entry = ParseJournalEntry(line);
    if (entry) return std::move(entry->message);
    if (!state->warned && !state->stopped) {
      state->warned = true;
      spdlog::warn("{} {}: journalctl -k: {}", state->options.run_id, state->options.step_id, line);
    }
    return std::nullopt;
  };
  auto on_exit = [state](const ExitStatus& status) {
    if (!state->stopped && status.signal != SIGTERM)
      spdlog::warn("{} {}: journalctl -k ended: {}; kernel messages are no longer followed",
                   state->options.run_id, state->options.step_id, status.ToString());
  };
  Result<std::shared_ptr<ChildProcess>> child =
      ChildProcess::Start(ex, spawn, state->on_line, std::move(on_exit));
  if (!child.ok()) return child.status();
  state->child = child.value();
  return std::unique_ptr<KernelLogFollower>(new KernelLogFollower(state));
}

void KernelLogFollower::Stop() {
  state_->stopped = true;
  if (!state_->child) return;
  state_->child->Terminate(std::chrono::seconds(1));
  // The child lives on while its handlers, which hold the state, are pending: no cycle.
  state_->child.reset();
}

}  // namespace deployd
