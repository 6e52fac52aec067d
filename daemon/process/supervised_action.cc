#include "process/supervised_action.h"

#include <signal.h>

#include <boost/json.hpp>
#include <filesystem>

#include "process/supervisor.h"
#include "util/units.h"

namespace deployd {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

// How the supervisor's record ended the attempt.
void EndOf(const SupervisorRecord& record, ActionEnd& end) {
  end.exit = record.exit;
  end.reason = record.exit.ToString();
  end.recorded = true;
  end.left = record.left;
  end.stuck = record.stuck;
  if (record.log_lost_lines > 0)
    end.log_lost = std::to_string(record.log_lost_lines) +
                   (record.log_lost_lines == 1 ? " line (" : " lines (") +
                   FormatSize(record.log_lost_bytes) +
                   ") of output could not be written to the log: " + record.log_error;
}

// A relative path would change meaning in the action's working directory.
std::string Absolute(const std::string& path) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return ec ? path : absolute.string();
}

}  // namespace

SupervisedAction::SupervisedAction(asio::any_io_executor) {}

Result<std::shared_ptr<SupervisedAction>> SupervisedAction::Start(asio::any_io_executor ex,
                                                                  SpawnOptions options,
                                                                  SupervisorOptions supervision,
                                                                  const std::string& supervisor_exe,
                                                                  Handlers handlers) {
  auto self = std::shared_ptr<SupervisedAction>(new SupervisedAction(ex));
  self->handlers_ = std::move(handlers);
  self->status_file_ = Absolute(supervision.status_file);
  // The supervisor writes the log itself; its stdout is a pipe that carries its one report.
  supervision.status_file = self->status_file_;
  supervision.log_file = Absolute(supervision.log_file);
  options.wrapper = SupervisorCommand(supervisor_exe, supervision);
  options.log_path.clear();
  std::weak_ptr<SupervisedAction> weak = self;
  Result<std::shared_ptr<ChildProcess>> child = ChildProcess::Start(
      ex, options,
      [weak](std::string_view line) {
        if (auto s = weak.lock()) s->OnReport(line);
      },
      [weak](const ExitStatus& status) {
        if (auto s = weak.lock()) s->Conclude(status.ToString());
      });
  if (!child.ok()) return child.status();
  self->supervisor_child_ = std::move(child.value());
  return self;
}

void SupervisedAction::OnReport(std::string_view line) {
  if (action_) return;
  Result<SupervisorRecord> record = SupervisorRecord::FromJson(line);
  if (!record.ok()) {
    start_error_ = std::string(line);  // a complaint of the supervisor's, before it gives up
    return;
  }
  if (record->state == SupervisorRecord::State::kFailedToStart) {
    start_error_ = record->error;
    return;
  }
  action_ = record->action;
  supervisor_ = record->supervisor;
  if (auto on_started = handlers_.on_started) on_started(record.value());
}

void SupervisedAction::Conclude(const std::string& how) {
  if (ended_) return;
  ended_ = true;
  supervisor_child_.reset();  // reaped: its pipe and pidfd are released now
  ActionEnd end;
  Result<std::optional<SupervisorRecord>> read = ReadSupervisorRecord(status_file_);
  const SupervisorRecord* record = read.ok() && read.value() ? &*read.value() : nullptr;
  if (record && record->state == SupervisorRecord::State::kExited &&
      (!action_ || action_->pid == record->action.pid)) {
    EndOf(*record, end);
  } else if (record && record->state == SupervisorRecord::State::kFailedToStart) {
    end.reason = record->error;
    end.recorded = true;
  } else if (!start_error_.empty()) {
    end.reason = start_error_;
  } else {
    std::string who = supervisor_ ? " (pid " + std::to_string(supervisor_->pid) + ")" : "";
    end.reason = "its supervisor" + who + " ended" + (how.empty() ? "" : " (" + how + ")") +
                 " without recording how the action ended" +
                 (read.ok() ? "" : ": " + read.status().message());
  }
  // A copy: the handler may Forget() this object, which replaces handlers_.
  if (auto on_end = handlers_.on_end) on_end(end);
}

SupervisedAction::Found SupervisedAction::Find(asio::any_io_executor ex,
                                               const std::string& status_file,
                                               const std::optional<ProcessIdentity>& committed,
                                               Handlers handlers) {
  Found found;
  // Who: as committed, or as the supervisor wrote it down when deployd went away before
  // committing its report (a foreground attempt's processes are never committed).
  std::optional<ProcessIdentity> action, supervisor = committed;
  Result<std::optional<SupervisorRecord>> read = ReadSupervisorRecord(status_file);
  // No record and no supervisor known: the attempt never started. A supervisor known (also one
  // that has not written its first record yet) is watched whatever its file says.
  if (read.ok() && !read.value() && !committed) {
    found.kind = Found::Kind::kNeverStarted;
    return found;
  }
  if (read.ok() && read.value()) {
    if (!supervisor) supervisor = read.value()->supervisor;
    if (read.value()->action.pid) action = read.value()->action;
  }
  if (supervisor && supervisor->pid) {
    Result<std::unique_ptr<ProcessExitWatch>> watch = ProcessExitWatch::Open(ex, *supervisor);
    if (watch.ok()) {
      auto self = std::shared_ptr<SupervisedAction>(new SupervisedAction(ex));
      self->handlers_ = std::move(handlers);
      self->status_file_ = status_file;
      self->action_ = action;
      self->supervisor_ = supervisor;
      self->exit_watch_ = std::move(watch.value());
      std::weak_ptr<SupervisedAction> weak = self;
      self->exit_watch_->AsyncWait([weak] {
        if (auto s = weak.lock()) s->Conclude("");
      });
      found.kind = Found::Kind::kAlive;
      found.watch = std::move(self);
      if (read.ok() && read.value()) found.record = *read.value();
      if (action) found.record.action = *action;
      found.record.supervisor = *supervisor;
      return found;
    }
    // Gone, possibly a moment ago: its last record is read again below.
    read = ReadSupervisorRecord(status_file);
    if (read.ok() && !read.value()) {
      found.kind = Found::Kind::kNeverStarted;  // it wrote nothing: it started nothing
      return found;
    }
  }
  if (read.ok() && read.value()) {
    const SupervisorRecord& record = *read.value();
    found.record = record;
    if (record.state == SupervisorRecord::State::kExited) {
      found.kind = Found::Kind::kEnded;
      EndOf(record, found.end);
    } else if (record.state == SupervisorRecord::State::kFailedToStart) {
      found.kind = Found::Kind::kEnded;
      found.end.reason = record.error;
      found.end.recorded = true;
    }
  }
  return found;
}

void SupervisedAction::Stop() {
  if (stop_asked_ || ended_) return;
  stop_asked_ = true;
  // The supervisor started here is our child, not reaped until Conclude: its pid is its own.
  if (supervisor_child_) {
    ::kill(supervisor_child_->pid(), SIGTERM);
  } else if (exit_watch_) {
    exit_watch_->Signal(SIGTERM);
  }
}

void SupervisedAction::Forget() { handlers_ = {}; }

}  // namespace deployd
