#include "process/supervisor_record.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <cerrno>

#include "util/atomic_file.h"

namespace deployd {

namespace json = boost::json;

namespace {

constexpr std::string_view StateName(SupervisorRecord::State s) {
  switch (s) {
    case SupervisorRecord::State::kStarting:
      return "starting";
    case SupervisorRecord::State::kRunning:
      return "running";
    case SupervisorRecord::State::kExited:
      return "exited";
    case SupervisorRecord::State::kFailedToStart:
      return "failed_to_start";
  }
  return "unknown";
}

std::optional<std::int64_t> IntField(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_int64()) {
    if (v && v->is_uint64()) return static_cast<std::int64_t>(v->as_uint64());
    return std::nullopt;
  }
  return v->as_int64();
}

json::array NotesToJson(const std::vector<ProcessNote>& notes, bool with_state) {
  json::array a;
  for (const ProcessNote& n : notes) {
    json::object o{{"pid", n.pid}, {"name", n.name}};
    if (with_state) o["state"] = std::string(1, n.state);
    a.push_back(std::move(o));
  }
  return a;
}

std::vector<ProcessNote> NotesFromJson(const json::object& o, std::string_view key) {
  std::vector<ProcessNote> notes;
  const json::value* v = o.if_contains(key);
  if (!v || !v->is_array()) return notes;
  for (const json::value& e : v->as_array()) {
    if (!e.is_object()) continue;
    const json::object& n = e.as_object();
    ProcessNote note;
    note.pid = static_cast<pid_t>(IntField(n, "pid").value_or(0));
    if (const json::value* name = n.if_contains("name"); name && name->is_string())
      note.name = std::string(name->as_string());
    if (const json::value* st = n.if_contains("state");
        st && st->is_string() && !st->as_string().empty())
      note.state = st->as_string()[0];
    notes.push_back(std::move(note));
  }
  return notes;
}

}  // namespace

std::string SupervisorRecord::ToJson() const {
  json::object o;
  o["state"] = StateName(state);
  o["pid"] = action.pid;
  o["start_time"] = action.start_time;
  o["supervisor_pid"] = supervisor.pid;
  o["supervisor_start_time"] = supervisor.start_time;
  o["boot_id"] = supervisor.boot_id;
  o["started_at_ms"] = started_at_ms;
  o["ended_at_ms"] = ended_at_ms;
  if (state == State::kExited) {
    o["exit_code"] = exit.code;
    o["signal"] = exit.signal;
    if (stopped) o["stopped"] = true;
    if (!left.empty()) o["left"] = NotesToJson(left, false);
    if (!stuck.empty()) o["stuck"] = NotesToJson(stuck, true);
  }
  if (log_lost_lines > 0) {
    o["log_lost_lines"] = log_lost_lines;
    o["log_lost_bytes"] = log_lost_bytes;
    o["log_error"] = log_error;
  }
  if (state == State::kFailedToStart) o["error"] = error;
  return json::serialize(o);
}

Result<SupervisorRecord> SupervisorRecord::FromJson(std::string_view text) {
  boost::system::error_code ec;
  json::value value = json::parse(text, ec);
  if (ec || !value.is_object()) return Status::Error("not a JSON object");
  const json::object& o = value.as_object();
  SupervisorRecord r;
  const json::value* state = o.if_contains("state");
  if (!state || !state->is_string()) return Status::Error("no \"state\"");
  if (*state == "starting") {
    r.state = State::kStarting;
  } else if (*state == "running") {
    r.state = State::kRunning;
  } else if (*state == "exited") {
    r.state = State::kExited;
  } else if (*state == "failed_to_start") {
    r.state = State::kFailedToStart;
  } else {
    return Status::Error("unknown state " + json::serialize(*state));
  }
  auto pid = IntField(o, "pid");
  auto start_time = IntField(o, "start_time");
  auto supervisor_pid = IntField(o, "supervisor_pid");
  auto supervisor_start_time = IntField(o, "supervisor_start_time");
  const json::value* boot_id = o.if_contains("boot_id");
  if (!pid || !start_time || !supervisor_pid || !supervisor_start_time || !boot_id ||
      !boot_id->is_string())
    return Status::Error("the processes are not named");
  r.action = {static_cast<pid_t>(*pid), static_cast<std::uint64_t>(*start_time),
              std::string(boot_id->as_string())};
  r.supervisor = {static_cast<pid_t>(*supervisor_pid),
                  static_cast<std::uint64_t>(*supervisor_start_time), r.action.boot_id};
  r.started_at_ms = IntField(o, "started_at_ms").value_or(0);
  r.ended_at_ms = IntField(o, "ended_at_ms").value_or(0);
  if (r.state == State::kExited) {
    auto code = IntField(o, "exit_code");
    auto signal = IntField(o, "signal");
    if (!code || !signal) return Status::Error("an exited record without its exit status");
    r.exit.code = static_cast<int>(*code);
    r.exit.signal = static_cast<int>(*signal);
    if (const json::value* v = o.if_contains("stopped"); v && v->is_bool())
      r.stopped = v->as_bool();
    r.left = NotesFromJson(o, "left");
    r.stuck = NotesFromJson(o, "stuck");
  }
  r.log_lost_lines = static_cast<std::uint64_t>(IntField(o, "log_lost_lines").value_or(0));
  r.log_lost_bytes = static_cast<std::uint64_t>(IntField(o, "log_lost_bytes").value_or(0));
  if (const json::value* v = o.if_contains("log_error"); v && v->is_string())
    r.log_error = std::string(v->as_string());
  if (r.state == State::kFailedToStart) {
    const json::value* error = o.if_contains("error");
    if (!error || !error->is_string()) return Status::Error("a start failure without its error");
    r.error = std::string(error->as_string());
  }
  return r;
}

namespace {

// Writes `text` over the file at `path` from its start, padded with spaces to the file's size,
// when that is enough room: the file's blocks are already there, so a full disk takes it.
bool OverwriteInPlace(const std::string& path, std::string text) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  bool fits = ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= text.size();
  if (fits) text.resize(static_cast<size_t>(st.st_size), ' ');
  size_t done = 0;
  while (fits && done < text.size()) {
    ssize_t n = ::pwrite(fd, text.data() + done, text.size() - done, static_cast<off_t>(done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return fits && done == text.size();
}

}  // namespace

Status WriteSupervisorRecord(const std::string& path, const SupervisorRecord& record) {
  std::string text = record.ToJson() + "\n";
  if (text.size() < kStatusFileReserve) text.resize(kStatusFileReserve, ' ');
  Status s = WriteFileAtomically(path, text, 0640, Durability::kProcessCrash);
  if (!s.ok() && OverwriteInPlace(path, record.ToJson() + "\n")) return Status::Ok();
  return s;
}

Result<std::optional<SupervisorRecord>> ReadSupervisorRecord(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<SupervisorRecord>();
    return Status::Error("cannot read " + path + ": " + ::strerror(errno));
  }
  std::string text;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return Status::Error("cannot read " + path + ": " + ::strerror(err));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  Result<SupervisorRecord> record = SupervisorRecord::FromJson(text);
  if (!record.ok()) {
    return Status::Error("the status file " + path + " is damaged: " + record.status().message());
  }
  return std::optional<SupervisorRecord>(std::move(record.value()));
}

}  // namespace deployd
