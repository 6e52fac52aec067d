#include "control/answer_streams.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <filesystem>
#include <utility>

#include "engine/wire_records.h"
#include "protocol/answer.h"
#include "protocol/follow_stream.h"
#include "util/log_follower.h"
#include "util/log_marks.h"
#include "util/utf8_text.h"

namespace deployd {

namespace json = boost::json;

namespace {

constexpr std::uintmax_t kMaxLogBytes = 1u << 20;  // the newest MiB of what is there

const json::string* StringField(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v ? v->if_string() : nullptr;
}

// `follow`: what happened before the client asked, then what happens next. One thread, so no
// event falls between the two.
class RunEventStream : public AnswerStream {
 public:
  RunEventStream(RequestContext& context, std::string run_id, std::function<void()> wake)
      : runs_(context.runs),
        store_(context.store),
        run_id_(std::move(run_id)),
        wake_(std::move(wake)) {}
  ~RunEventStream() override {
    if (token_) runs_.Unsubscribe(token_);
  }

  void Push(const json::object& line, bool keep = false) { queue_.Push(line, keep); }

  // Events as they are committed; the run's final record once it has ended.
  void Subscribe() {
    token_ = runs_.Subscribe(run_id_, [this](const json::object& line) {
      queue_.Push(line);
      WireEvent event = DecodeEvent(line);
      if (event.kind == "run.state") {
        auto s = ParseRunState(event.state);
        if (s && IsTerminal(*s)) {
          Result<std::optional<RunRecord>> final_run = store_.LoadRun(run_id_, true);
          if (final_run.ok() && final_run.value())
            queue_.Push(EncodeEndLine(ToWire(*final_run.value())));
        }
      }
      wake_();
    });
  }

  std::deque<StreamLine> Take() override {
    std::deque<StreamLine> lines = queue_.Take();
    // Events were dropped: the run as it is now brings the client back to the present.
    if (queue_.missed_events() && !lines.back().last) {
      Result<std::optional<RunRecord>> now = store_.LoadRun(run_id_, true);
      if (now.ok() && now.value()) {
        WireRun snapshot = ToWire(*now.value());
        runs_.AddProgress(snapshot);
        runs_.AddStorageFault(snapshot);
        lines.push_back({json::serialize(EncodeSnapshotLine(snapshot)), false});
      }
    }
    return lines;
  }
  bool Ready() const override { return !queue_.empty(); }

 private:
  RunManager& runs_;
  RunStore& store_;
  const std::string run_id_;
  std::function<void()> wake_;
  StreamQueue queue_;
  std::uint64_t token_ = 0;
};

// `logs -f`: the log's bytes as they are written, cut only between characters, until the step
// has ended and the processes of its actions have exited. While its client's budget is full,
// the log is not read on (nothing of it is dropped): the file keeps what the client has not
// read yet, and it is read on once the client has taken what waited.
class LogStream : public AnswerStream {
 public:
  // Shared with callbacks that may outlive the stream (a posted exit notice).
  struct State {
    StreamQueue queue;
    std::string partial;  // the first bytes of a character cut at the end of a piece
    std::string state;
    bool step_done = false;
    bool exited = false;
    std::shared_ptr<void> exit_watch;      // waiting for the step's processes; dropped with us
    LogFollower* follower = nullptr;       // the stream's; on_data is never called after it goes
    bool times = false;                    // the client asked for when the lines were written
    std::unique_ptr<LogMarkReader> marks;  // of the file being read (util/log_marks.h)
    std::uint64_t marks_file = 0;

    // Queues `data`, which ends at `end` in the log (`path`, as that file was named when it
    // was opened), in whole characters: the first bytes of one cut at its end wait for the
    // next piece (and the position says so). With its marks: where attempts begin, and times.
    void Deliver(std::string_view data, LogPosition end, const std::string& path,
                 bool keep = false) {
      std::uint64_t text_from =
          end.offset - std::min<std::uint64_t>(end.offset, data.size() + partial.size());
      std::string text = partial + std::string(data);
      size_t complete = CompleteUtf8Prefix(text);
      partial = text.substr(complete);
      text.resize(complete);
      if (text.empty()) return;
      end.offset -= std::min<std::uint64_t>(end.offset, partial.size());
      json::object line = EncodeLogData(ValidUtf8(text), end);
      if (!marks || marks_file != end.file) {
        marks = std::make_unique<LogMarkReader>(path, times);
        marks_file = end.file;
      }
      AddLogMarks(line, marks->Marks(text_from, end.offset), text_from, 0, times);
      queue.Push(line, keep);
    }
  };

  LogStream(RequestContext& context, std::string run_id, std::string step_id, StepState state,
            bool times, std::function<void()> wake)
      : runs_(context.runs),
        run_id_(std::move(run_id)),
        step_id_(std::move(step_id)),
        wake_(std::move(wake)),
        state_(std::make_shared<State>()) {
    state_->state = ToString(state);
    state_->times = times;
  }
  ~LogStream() override {
    if (token_) runs_.Unsubscribe(token_);
    if (follower_) follower_->Stop();
  }

  // `resume`: where the client's copy of the log ends (it reconnects).
  Status Start(boost::asio::any_io_executor ex, bool step_ended,
               const std::optional<LogPosition>& resume) {
    std::string path = runs_.LogPath(run_id_, step_id_);
    ResumePoint point = resume ? FindResume(path, *resume) : ResumePoint{};
    json::object start_line = EncodeLogStart(run_id_, step_id_, path);
    if (resume) start_line["resumed"] = point.found;
    state_->queue.Push(start_line, /*keep=*/true);
    std::error_code size_error;
    std::uintmax_t size = std::filesystem::file_size(path, size_error);
    std::uint64_t start = !size_error && size > kMaxLogBytes ? size - kMaxLogBytes : 0;
    if (point.found && point.rotated) {
      PushRotatedRest(path + ".1", point.offset);
      start = 0;
    } else if (point.found) {
      start = point.offset;
    }
    Result<std::unique_ptr<LogFollower>> follower = LogFollower::Start(
        ex, path, start, [state = state_, wake = wake_, path](std::string_view data) {
          state->Deliver(data, {state->follower->file_id(), state->follower->offset()}, path);
          if (state->queue.full()) state->follower->Pause();
          wake();
        });
    if (!follower.ok()) return follower.status();
    follower_ = std::move(follower.value());
    state_->follower = follower_.get();
    token_ = runs_.Subscribe(run_id_, [this](const json::object& line) { OnEvent(line); });
    if (step_ended) StepEnded();
    return Status::Ok();
  }

  std::deque<StreamLine> Take() override {
    State& s = *state_;
    if (s.step_done && s.exited && !follower_->paused()) {
      // The writers are gone: their last bytes may not have been announced yet.
      follower_->CatchUp();
      if (!follower_->paused()) {
        if (!s.partial.empty())
          s.queue.Push(EncodeLogData(ValidUtf8(s.partial),
                                     LogPosition{follower_->file_id(), follower_->offset()}));
        s.queue.Push(EncodeLogEnd(run_id_, step_id_, s.state));
        s.step_done = false;  // ends once the queue is sent
      }
    }
    std::deque<StreamLine> lines = s.queue.Take();
    follower_->Resume();  // what waited is taken: the log is read on
    return lines;
  }

  bool Ready() const override {
    return !state_->queue.empty() || (state_->step_done && state_->exited);
  }

 private:
  // Where a client that had the log up to `at` goes on: in the log itself, or in its rotated
  // predecessor (whose rest comes first); none when neither is that file any more.
  struct ResumePoint {
    bool found = false;
    bool rotated = false;
    std::uint64_t offset = 0;
  };
  static ResumePoint FindResume(const std::string& path, LogPosition at) {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0 && st.st_ino == at.file) return {true, false, at.offset};
    if (::stat((path + ".1").c_str(), &st) == 0 && st.st_ino == at.file)
      return {true, true, at.offset};
    return {};
  }

  // The rest of the rotated log from `offset` on (its newest MiB at most), sent before the
  // log's own bytes.
  void PushRotatedRest(const std::string& rotated, std::uint64_t offset) {
    State& s = *state_;
    int fd = ::open(rotated.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || ::fstat(fd, &st) != 0) {
      if (fd >= 0) ::close(fd);
      return;
    }
    const std::uint64_t size = static_cast<std::uint64_t>(st.st_size);
    offset = std::min(offset, size);
    if (size - offset > kMaxLogBytes) {
      WireMissed missed;
      missed.bytes = static_cast<std::int64_t>(size - kMaxLogBytes - offset);
      s.queue.Push(EncodeMissed(missed), /*keep=*/true);
      offset = size - kMaxLogBytes;
    }
    std::string buffer(64 * 1024, '\0');
    while (offset < size) {
      ssize_t n = ::pread(fd, buffer.data(), buffer.size(), static_cast<off_t>(offset));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      offset += static_cast<std::uint64_t>(n);
      s.Deliver(std::string_view(buffer.data(), static_cast<size_t>(n)), {st.st_ino, offset},
                rotated,
                /*keep=*/true);
    }
    ::close(fd);
    // The log's bytes are another file's: a character cut here does not go on there.
    if (!s.partial.empty())
      s.queue.Push(EncodeLogData(ValidUtf8(s.partial), LogPosition{st.st_ino, offset}), true);
    s.partial.clear();
  }

  void OnEvent(const json::object& line) {
    WireEvent event = DecodeEvent(line);
    if (event.kind != "step.state" || event.step != step_id_) return;
    state_->state = event.state;
    auto s = ParseStepState(event.state);
    if (s && IsTerminal(*s) && !state_->step_done) StepEnded();
    wake_();
  }

  void StepEnded() {
    state_->step_done = true;
    std::weak_ptr<State> weak = state_;
    state_->exit_watch = runs_.WhenActionsExit(run_id_, step_id_, [weak, wake = wake_] {
      if (auto s = weak.lock()) {
        s->exited = true;
        wake();
      }
    });
  }

  RunManager& runs_;
  const std::string run_id_;
  const std::string step_id_;
  std::function<void()> wake_;
  std::shared_ptr<State> state_;
  std::unique_ptr<LogFollower> follower_;
  std::uint64_t token_ = 0;
};

}  // namespace

StreamAnswer FollowRun(RequestContext& context, const json::object& request,
                       std::function<void()> wake) {
  const json::string* run_field = StringField(request, "run");
  if (!run_field) return ErrorAnswer("bad request: follow needs \"run\"");
  std::string run_id(*run_field);
  Result<std::optional<RunRecord>> loaded = context.store.LoadRun(run_id, true);
  if (!loaded.ok()) return ErrorAnswer(loaded.status().message());
  if (!loaded.value()) return ErrorAnswer("no run '" + run_id + "'");
  const RunRecord& run = *loaded.value();

  auto stream = std::make_unique<RunEventStream>(context, run_id, std::move(wake));
  WireRun snapshot = ToWire(run);
  context.runs.AddProgress(snapshot);
  context.runs.AddStorageFault(snapshot);
  stream->Push(EncodeSnapshotLine(snapshot), /*keep=*/true);
  // A client that reconnects has the events up to after_seq: the snapshot and what came since.
  std::int64_t after_seq = 0;
  if (const json::value* v = request.if_contains("after_seq"); v && v->is_int64())
    after_seq = v->as_int64();
  Result<std::vector<EventRecord>> past = context.store.Events(run_id);
  if (!past.ok()) return ErrorAnswer(past.status().message());
  for (const EventRecord& e : past.value())
    if (e.seq > after_seq) stream->Push(EventToJson(run_id, e), /*keep=*/true);
  if (IsTerminal(run.state)) {
    stream->Push(EncodeEndLine(ToWire(run)));
  } else {
    stream->Subscribe();
  }
  return stream;
}

StreamAnswer FollowLog(RequestContext& context, const json::object& request,
                       boost::asio::any_io_executor ex, std::function<void()> wake) {
  const json::string* run_field = StringField(request, "run");
  const json::string* step_field = StringField(request, "step");
  if (!run_field || !step_field)
    return ErrorAnswer("bad request: following logs needs \"run\" and \"step\"");
  std::string run_id(*run_field);
  std::string step_id(*step_field);
  Result<std::optional<RunRecord>> loaded = context.store.LoadRun(run_id, true);
  if (!loaded.ok()) return ErrorAnswer(loaded.status().message());
  if (!loaded.value()) return ErrorAnswer("no run '" + run_id + "'");
  std::optional<StepState> state;
  for (const StepRecord& s : loaded.value()->steps)
    if (s.id == step_id) state = s.state;
  if (!state) return ErrorAnswer("run " + run_id + " has no step '" + step_id + "'");

  std::optional<LogPosition> resume;
  if (const json::value* v = request.if_contains("resume")) {
    resume = DecodeLogPosition(*v);
    if (!resume) return ErrorAnswer("bad request: \"resume\" must be {\"file\": N, \"offset\": N}");
  }
  const json::value* times = request.if_contains("timestamps");
  auto stream =
      std::make_unique<LogStream>(context, run_id, step_id, *state,
                                  times && times->is_bool() && times->as_bool(), std::move(wake));
  if (Status s = stream->Start(std::move(ex), IsTerminal(*state), resume); !s.ok())
    return ErrorAnswer(s.message());
  return stream;
}

}  // namespace deployd
