#include "engine/journal_follower.h"

#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <iterator>
#include <map>
#include <set>
#include <vector>

#include "process/child_process.h"
#include "util/journal_entry.h"

namespace deployd {

// The entries before the fire that name the invocation that came last: the unit's lines of
// one start, plus systemd's. Enough unless the unit said nothing for this many lines.
constexpr char kLookBack[] = "50";

struct JournalFollower::State {
  boost::asio::any_io_executor ex;
  Options options;
  LineHandler on_line;
  std::string previous;  // the invocation journaled last before the fire ("" when none)
  // The processes that wrote `previous`'s own lines (its main process): what they write is
  // `previous`'s whatever invocation journald stamps on it (journal_entry.h).
  std::set<std::int64_t> previous_pids;
  std::string latest;  // recovering: the unit's invocation journaled last, now
  bool previous_counts = false;
  bool other_seen = false;  // an entry of another invocation than `previous` has come
  bool stopped = false;
  std::shared_ptr<ChildProcess> child;

  bool Counts(const JournalEntry& entry) {
    bool of_previous = !previous.empty() && entry.invocation == previous;
    if (of_previous && entry.pid > 1) previous_pids.insert(entry.pid);
    of_previous = of_previous || previous_pids.contains(entry.pid);
    if (!of_previous) {
      other_seen = other_seen || !entry.invocation.empty();
      return true;
    }
    return previous_counts;
  }

  std::vector<std::string> Argv(std::vector<std::string> args) const {
    std::vector<std::string> argv = {"journalctl", "-u", options.unit, "-q", "--no-pager"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.insert(argv.end(), std::begin(kJournalJsonArgs), std::end(kJournalJsonArgs));
    return argv;
  }
};

namespace {

using State = JournalFollower::State;

// Runs a journalctl that ends by itself; `last` gets the invocation of its last entry that has
// one, and `pids` (when given) the processes of its lines but systemd's, then `then` runs
// (unless the follower was stopped meanwhile).
Status LookUp(std::shared_ptr<State> state, std::vector<std::string> args, std::string* last,
              std::set<std::int64_t>* pids, std::function<void(std::shared_ptr<State>)> then) {
  SpawnOptions options;
  options.argv = state->Argv(std::move(args));
  auto writers = std::make_shared<std::map<std::string, std::set<std::int64_t>>>();
  auto on_line = [last, writers](std::string_view line) {
    std::optional<JournalEntry> entry = ParseJournalEntry(line);
    if (!entry || entry->invocation.empty()) return;
    *last = entry->invocation;
    if (entry->pid > 1) (*writers)[entry->invocation].insert(entry->pid);
  };
  auto on_exit = [state, last, pids, writers, then = std::move(then)](const ExitStatus& status) {
    if (state->stopped) return;
    if (pids) *pids = std::move((*writers)[*last]);
    if (!status.ok())
      spdlog::warn("{}: journalctl -u {} ended: {}", state->options.run_id, state->options.unit,
                   status.ToString());
    then(state);
  };
  Result<std::shared_ptr<ChildProcess>> child =
      ChildProcess::Start(state->ex, options, std::move(on_line), std::move(on_exit));
  if (!child.ok()) return child.status();
  state->child = child.value();
  return Status::Ok();
}

void Follow(std::shared_ptr<State> state) {
  const JournalFollower::Options& o = state->options;
  // Unknown (nothing the unit journaled names an invocation): counted, a fatal line is not
  // to be missed.
  if (o.recovering)
    state->previous_counts = state->latest.empty() || state->latest == state->previous;
  SpawnOptions options;
  options.argv = state->Argv({"-f", "--no-tail", "--since", JournalTime(o.fired_at_ms)});
  options.log_path = o.log_path;
  options.log_cap_bytes = o.log_cap_bytes;
  // Only the unit's lines reach the log and fail_on; the rest are dropped here.
  options.rewrite_line = [state](std::string_view line) -> std::optional<std::string> {
    std::optional<JournalEntry> entry = ParseJournalEntry(line);
    if (!entry || !state->Counts(*entry)) return std::nullopt;
    if (entry->realtime_us / 1000 <= state->options.logged_until_ms) {
      // Handed on here, past the log.
      for (size_t pos = 0; pos < entry->message.size();) {
        size_t end = std::min(entry->message.find('\n', pos), entry->message.size());
        if (end > pos) state->on_line(std::string_view(entry->message).substr(pos, end - pos));
        pos = end + 1;
      }
      return std::nullopt;
    }
    return std::move(entry->message);
  };
  auto on_exit = [state](const ExitStatus& status) {
    if (!state->stopped && !(status.signal == SIGTERM))
      spdlog::warn("{}: journalctl -u {} ended: {}", state->options.run_id, state->options.unit,
                   status.ToString());
  };
  Result<std::shared_ptr<ChildProcess>> child =
      ChildProcess::Start(state->ex, options, state->on_line, std::move(on_exit));
  if (!child.ok()) {
    spdlog::warn("{}: cannot follow the journal of {}: {}", o.run_id, o.unit,
                 child.status().message());
    return;
  }
  state->child = child.value();
}

}  // namespace

JournalFollower::JournalFollower(std::shared_ptr<State> state) : state_(std::move(state)) {}

JournalFollower::~JournalFollower() { Stop(); }

Result<std::unique_ptr<JournalFollower>> JournalFollower::Start(boost::asio::any_io_executor ex,
                                                                const Options& options,
                                                                LineHandler on_line) {
  auto state = std::make_shared<State>();
  state->ex = std::move(ex);
  state->options = options;
  state->on_line = std::move(on_line);
  auto after_previous = [](std::shared_ptr<State> s) {
    if (!s->options.recovering) return Follow(s);
    if (Status st = LookUp(s, {"-n", kLookBack}, &s->latest, nullptr, Follow); !st.ok())
      spdlog::warn("{}: cannot read the journal of {}: {}", s->options.run_id, s->options.unit,
                   st.message());
  };
  Status started = LookUp(state, {"--until", JournalTime(options.fired_at_ms), "-n", kLookBack},
                          &state->previous, &state->previous_pids, after_previous);
  if (!started.ok()) return started;
  return std::unique_ptr<JournalFollower>(new JournalFollower(state));
}

void JournalFollower::Arm() {
  if (!state_->other_seen) state_->previous_counts = true;
}

void JournalFollower::Stop() {
  state_->stopped = true;
  if (!state_->child) return;
  state_->child->Terminate(std::chrono::seconds(1));
  // The child lives on while its handlers, which hold the state, are pending: no cycle.
  state_->child.reset();
}

}  // namespace deployd
