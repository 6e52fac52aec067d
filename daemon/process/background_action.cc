#include "process/background_action.h"

#include <signal.h>

#include <boost/json.hpp>
#include <filesystem>

#include "process/supervisor.h"

namespace deployd {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

std::optional<std::int64_t> IntField(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v && v->is_int64()) return v->as_int64();
  if (v && v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
  return std::nullopt;
}

// A relative path would change meaning in the action's working directory.
std::string Absolute(const std::string& path) {
  std::error_code ec;
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  return ec ? path : absolute.string();
}

}  // namespace

std::string BackgroundActionInfo::ToJson() const {
  json::object o;
  o["kind"] = "background";
  o["status_file"] = status_file;
  o["log_offset"] = log_offset;
  if (action && supervisor) {
    o["pid"] = action->pid;
    o["start_time"] = action->start_time;
    o["supervisor_pid"] = supervisor->pid;
    o["supervisor_start_time"] = supervisor->start_time;
    o["boot_id"] = supervisor->boot_id;
  }
  return json::serialize(o);
}

std::optional<BackgroundActionInfo> BackgroundActionInfo::FromJson(std::string_view text) {
  boost::system::error_code ec;
  json::value value = json::parse(text, ec);
  if (ec || !value.is_object()) return std::nullopt;
  const json::object& o = value.as_object();
  const json::value* kind = o.if_contains("kind");
  const json::value* status_file = o.if_contains("status_file");
  if (!kind || *kind != "background" || !status_file || !status_file->is_string())
    return std::nullopt;
  BackgroundActionInfo info;
  info.status_file = std::string(status_file->as_string());
  info.log_offset = static_cast<std::uint64_t>(IntField(o, "log_offset").value_or(0));
  auto pid = IntField(o, "pid");
  auto start_time = IntField(o, "start_time");
  auto supervisor_pid = IntField(o, "supervisor_pid");
  auto supervisor_start_time = IntField(o, "supervisor_start_time");
  const json::value* boot_id = o.if_contains("boot_id");
  if (pid && start_time && supervisor_pid && supervisor_start_time && boot_id &&
      boot_id->is_string()) {
    std::string boot(boot_id->as_string());
    info.action =
        ProcessIdentity{static_cast<pid_t>(*pid), static_cast<std::uint64_t>(*start_time), boot};
    info.supervisor = ProcessIdentity{static_cast<pid_t>(*supervisor_pid),
                                      static_cast<std::uint64_t>(*supervisor_start_time), boot};
  }
  return info;
}

BackgroundAction::BackgroundAction(asio::any_io_executor ex) : kill_timer_(ex) {}

Result<std::shared_ptr<BackgroundAction>> BackgroundAction::Start(asio::any_io_executor ex,
                                                                  SpawnOptions options,
                                                                  const std::string& supervisor_exe,
                                                                  const std::string& status_file,
                                                                  Handlers handlers) {
  auto self = std::shared_ptr<BackgroundAction>(new BackgroundAction(ex));
  self->handlers_ = std::move(handlers);
  self->status_file_ = Absolute(status_file);
  // The supervisor writes the log itself; its stdout is a pipe that carries its one report.
  SupervisorOptions supervision;
  supervision.status_file = self->status_file_;
  supervision.log_file = Absolute(options.log_path);
  supervision.log_cap_bytes = options.log_cap_bytes;
  options.wrapper = SupervisorCommand(supervisor_exe, supervision);
  options.log_path.clear();
  std::weak_ptr<BackgroundAction> weak = self;
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

void BackgroundAction::OnReport(std::string_view line) {
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
  if (stop_grace_) SignalGroup();
  keep_alive_.reset();  // the caller holds a reference
  if (handlers_.on_started) handlers_.on_started(record.value());
}

void BackgroundAction::Conclude(const std::string& how) {
  if (ended_) return;
  ended_ = true;
  keep_alive_.reset();  // the caller holds a reference
  ActionEnd end;
  Result<std::optional<SupervisorRecord>> read = ReadSupervisorRecord(status_file_);
  const SupervisorRecord* record = read.ok() && read.value() ? &*read.value() : nullptr;
  if (record && record->state == SupervisorRecord::State::kExited &&
      (!action_ || action_->pid == record->action.pid)) {
    end.exit = record->exit;
    end.reason = record->exit.ToString();
  } else if (record && record->state == SupervisorRecord::State::kFailedToStart) {
    end.reason = record->error;
  } else if (!start_error_.empty()) {
    end.reason = start_error_;
  } else {
    std::string who = supervisor_ ? " (pid " + std::to_string(supervisor_->pid) + ")" : "";
    end.reason = "its supervisor" + who + " ended" + (how.empty() ? "" : " (" + how + ")") +
                 " without recording how the action ended" +
                 (read.ok() ? "" : ": " + read.status().message());
  }
  if (handlers_.on_end) handlers_.on_end(end);
}

BackgroundAction::Found BackgroundAction::Find(asio::any_io_executor ex,
                                               const BackgroundActionInfo& info,
                                               Handlers handlers) {
  Found found;
  // Who: as committed, or as the supervisor wrote it down when deployd went away before
  // committing its report.
  std::optional<ProcessIdentity> action = info.action, supervisor = info.supervisor;
  Result<std::optional<SupervisorRecord>> read = ReadSupervisorRecord(info.status_file);
  if (!supervisor && read.ok() && read.value()) {
    action = read.value()->action;
    supervisor = read.value()->supervisor;
  }
  if (supervisor && action) {
    Result<std::unique_ptr<ProcessExitWatch>> watch = ProcessExitWatch::Open(ex, *supervisor);
    if (watch.ok()) {
      auto self = std::shared_ptr<BackgroundAction>(new BackgroundAction(ex));
      self->handlers_ = std::move(handlers);
      self->status_file_ = info.status_file;
      self->action_ = action;
      self->supervisor_ = supervisor;
      self->exit_watch_ = std::move(watch.value());
      std::weak_ptr<BackgroundAction> weak = self;
      self->exit_watch_->AsyncWait([weak] {
        if (auto s = weak.lock()) s->Conclude("");
      });
      found.kind = Found::Kind::kAlive;
      found.watch = std::move(self);
      found.record.action = *action;
      found.record.supervisor = *supervisor;
      return found;
    }
    // Gone, possibly a moment ago: its last record is read again below.
    read = ReadSupervisorRecord(info.status_file);
  }
  if (read.ok() && read.value()) {
    const SupervisorRecord& record = *read.value();
    if (record.state == SupervisorRecord::State::kExited) {
      found.kind = Found::Kind::kEnded;
      found.record = record;
      found.end.exit = record.exit;
      found.end.reason = record.exit.ToString();
    } else if (record.state == SupervisorRecord::State::kFailedToStart) {
      found.kind = Found::Kind::kEnded;
      found.record = record;
      found.end.reason = record.error;
    }
  }
  return found;
}

void BackgroundAction::Stop(Duration grace) {
  if (stop_grace_) return;
  stop_grace_ = grace;
  if (action_) {
    SignalGroup();
  } else if (!ended_) {
    keep_alive_ = shared_from_this();  // stopped as soon as the supervisor reports the action
  }
}

void BackgroundAction::SignalGroup() {
  // Once the supervisor has recorded the end, the pid may belong to someone else.
  if (ended_ || !action_ || !action_->IsAlive()) return;
  pid_t group = action_->pid;
  ::kill(-group, SIGTERM);
  kill_timer_.expires_after(*stop_grace_);
  kill_timer_.async_wait([self = shared_from_this(), group](boost::system::error_code ec) {
    // The group outlives its leader when a grandchild ignores SIGTERM; while it has members,
    // its id cannot be given to another process.
    if (!ec && ::kill(-group, 0) == 0) ::kill(-group, SIGKILL);
  });
}

void BackgroundAction::Forget() { handlers_ = {}; }

}  // namespace deployd
