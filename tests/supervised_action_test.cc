// SupervisedAction with the real supervisor (the deployd binary built alongside, re-executed
// with --supervise), real processes and a real status file; and the pieces it stands on:
// ProcessIdentity, ProcessExitWatch, SupervisorRecord.
#include "process/supervised_action.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "process/process_exit_watch.h"
#include "process/process_identity.h"
#include "process/spawn.h"
#include "process/supervisor.h"
#include "process/supervisor_record.h"
#include "test_support.h"
#include "util/atomic_file.h"

using namespace deployd;
namespace asio = boost::asio;

using deployd::testing::ReadFile;
using deployd::testing::TempDir;

namespace {

template <typename Predicate>
void RunUntil(asio::io_context& io, Predicate done) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    io.restart();
    io.run_one_for(std::chrono::milliseconds(20));
  }
}

struct Watched {
  std::optional<SupervisorRecord> started;
  std::optional<ActionEnd> end;
  std::shared_ptr<SupervisedAction> action;
};

std::unique_ptr<Watched> StartAction(asio::io_context& io, const TempDir& dir,
                                     std::vector<std::string> argv) {
  auto w = std::make_unique<Watched>();
  SpawnOptions options;
  options.argv = std::move(argv);
  SupervisorOptions supervision;
  supervision.status_file = dir.File("step.1.status");
  supervision.log_file = dir.File("step.log");
  supervision.grace = std::chrono::milliseconds(200);
  SupervisedAction::Handlers handlers;
  handlers.on_started = [w = w.get()](const SupervisorRecord& r) { w->started = r; };
  handlers.on_end = [w = w.get()](const ActionEnd& e) { w->end = e; };
  auto started = SupervisedAction::Start(io.get_executor(), options, supervision, DEPLOYD_TEST_BIN,
                                         std::move(handlers));
  INFO((started.ok() ? "" : started.status().message()));
  REQUIRE(started.ok());
  w->action = started.value();
  return w;
}

bool Alive(pid_t pid) {
  auto identity = ProcessIdentity::Of(pid);
  return identity && identity->IsAlive();
}

// Waits (bounded) until `pid` has ended; the test's own wait, not the product's.
bool Gone(pid_t pid) {
  for (int i = 0; i < 500; ++i) {
    if (!Alive(pid)) return true;
    ::usleep(10000);
  }
  return false;
}

}  // namespace

TEST_CASE("a process identity tells a process from another with the same pid") {
  auto me = ProcessIdentity::Of(::getpid());
  REQUIRE(me.has_value());
  CHECK(me->IsAlive());
  CHECK_FALSE(CurrentBootId().empty());
  ProcessIdentity other = *me;
  other.start_time += 1;
  CHECK_FALSE(other.IsAlive());
  other = *me;
  other.boot_id = "another boot";
  CHECK_FALSE(other.IsAlive());
  CHECK_FALSE(ProcessIdentity::Of(-1).has_value());

  // A zombie has ended, although /proc still shows it until it is reaped.
  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  auto zombie = ProcessIdentity::Of(child);
  REQUIRE(zombie.has_value());
  CHECK(Gone(child));
  CHECK(ProcessIdentity::Of(child).has_value());
  ::waitpid(child, nullptr, 0);
  CHECK_FALSE(ProcessIdentity::Of(child).has_value());
}

TEST_CASE("a process exit watch fires when the process exits, and refuses another process") {
  asio::io_context io;
  int pipe_fds[2];
  REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(pipe_fds[1]);
    char c;
    (void)!::read(pipe_fds[0], &c, 1);
    ::_exit(0);
  }
  ::close(pipe_fds[0]);
  auto identity = ProcessIdentity::Of(child);
  REQUIRE(identity.has_value());

  ProcessIdentity impostor = *identity;
  impostor.start_time += 1;
  auto refused = ProcessExitWatch::Open(io.get_executor(), impostor);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().message() ==
        "process " + std::to_string(child) + " is no longer the one started");

  auto watch = ProcessExitWatch::Open(io.get_executor(), *identity);
  REQUIRE(watch.ok());
  bool exited = false;
  watch.value()->AsyncWait([&] { exited = true; });
  io.restart();
  io.run_for(std::chrono::milliseconds(50));
  CHECK_FALSE(exited);
  ::close(pipe_fds[1]);
  RunUntil(io, [&] { return exited; });
  ::waitpid(child, nullptr, 0);
}

TEST_CASE("supervisor records round-trip; the status file is replaced atomically") {
  TempDir dir;
  SupervisorRecord r;
  r.state = SupervisorRecord::State::kExited;
  r.action = {42, 1000, "boot"};
  r.supervisor = {41, 999, "boot"};
  r.started_at_ms = 5;
  r.ended_at_ms = 9;
  r.exit.signal = SIGTERM;
  REQUIRE(WriteSupervisorRecord(dir.File("s"), r).ok());
  auto read = ReadSupervisorRecord(dir.File("s"));
  REQUIRE(read.ok());
  REQUIRE(read.value().has_value());
  CHECK(read.value()->ToJson() == r.ToJson());
  CHECK(read.value()->action == r.action);
  CHECK(read.value()->exit.signal == SIGTERM);
  CHECK_FALSE(std::filesystem::exists(dir.File(".s.deployd-tmp")));

  auto missing = ReadSupervisorRecord(dir.File("none"));
  REQUIRE(missing.ok());
  CHECK_FALSE(missing.value().has_value());
  REQUIRE(WriteFileAtomically(dir.File("bad"), "{\"state\": \"exploded\"}", 0640).ok());
  auto bad = ReadSupervisorRecord(dir.File("bad"));
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() ==
        "the status file " + dir.File("bad") + " is damaged: unknown state \"exploded\"");
}

TEST_CASE("the supervisor starts the action in its own group and records its exit") {
  TempDir dir;
  asio::io_context io;
  auto w =
      StartAction(io, dir, {"/bin/sh", "-c", "echo out; echo err >&2; ls /proc/self/fd; exit 3"});
  RunUntil(io, [&] { return w->end.has_value(); });
  REQUIRE(w->started.has_value());
  CHECK(w->started->state == SupervisorRecord::State::kRunning);
  CHECK(w->started->action.pid != w->started->supervisor.pid);
  CHECK(w->action->action() == w->started->action);
  REQUIRE(w->end->exit.has_value());
  CHECK(w->end->exit->code == 3);
  CHECK(w->end->reason == "exit status 3");
  // stdout and stderr in the log; no descriptor but 0, 1, 2 (and ls's own) in the action.
  CHECK(ReadFile(dir.File("step.log")) == "out\nerr\n0\n1\n2\n3\n");
  auto record = ReadSupervisorRecord(dir.File("step.1.status"));
  REQUIRE(record.ok());
  REQUIRE(record.value().has_value());
  CHECK(record.value()->state == SupervisorRecord::State::kExited);
  CHECK(record.value()->exit.code == 3);
  CHECK(record.value()->action == w->started->action);
  CHECK(record.value()->ended_at_ms >= record.value()->started_at_ms);
}

TEST_CASE("stopping asks the supervisor; it ends the whole attempt, SIGKILL after the grace") {
  TempDir dir;
  asio::io_context io;
  // The grandchild ignores SIGTERM: only the SIGKILL after the grace period ends it.
  auto w = StartAction(
      io, dir,
      {"/bin/sh", "-c",
       "(trap '' TERM; exec sleep 60) & echo $! > " + dir.File("grandchild") + "; wait"});
  RunUntil(io, [&] { return w->started.has_value(); });
  pid_t action = w->started->action.pid;
  pid_t supervisor = w->started->supervisor.pid;
  CHECK(::getpgid(action) == action);
  CHECK(::getpgid(supervisor) != action);
  RunUntil(io, [&] {
    return std::filesystem::exists(dir.File("grandchild")) &&
           !ReadFile(dir.File("grandchild")).empty();
  });
  pid_t grandchild = std::stoi(ReadFile(dir.File("grandchild")));
  CHECK(Alive(supervisor));
  // The supervisor holds nothing of the daemon's (here: the test's), only /dev/null, the log,
  // the action's output pipe and its signalfd, once it has let go of the pipe its report
  // went through.
  auto foreign_fds = [&] {
    std::string foreign;
    for (const auto& fd :
         std::filesystem::directory_iterator("/proc/" + std::to_string(supervisor) + "/fd")) {
      std::string target = std::filesystem::read_symlink(fd.path()).string();
      bool own = target == "/dev/null" || target == dir.File("step.log") ||
                 (fd.path().filename() != "1" &&
                  (target == "anon_inode:[signalfd]" || target.starts_with("pipe:")));
      if (!own) foreign += " " + fd.path().filename().string() + "->" + target;
    }
    return foreign;
  };
  RunUntil(io, [&] { return foreign_fds().empty(); });

  w->action->Stop();
  RunUntil(io, [&] { return w->end.has_value(); });
  // The end comes once every process of the attempt is gone.
  CHECK_FALSE(Alive(action));
  CHECK_FALSE(Alive(grandchild));
  CHECK(w->end->recorded);
  auto record = ReadSupervisorRecord(dir.File("step.1.status"));
  CHECK(record.value()->stopped);
  CHECK(record.value()->exit.signal == SIGTERM);
  RunUntil(io, [&] { return !Alive(supervisor); });
}

TEST_CASE("an action that cannot be executed is reported by the supervisor") {
  TempDir dir;
  asio::io_context io;
  std::ofstream(dir.File("not-executable")) << "#!/bin/sh\n";
  auto w = StartAction(io, dir, {dir.File("not-executable")});
  RunUntil(io, [&] { return w->end.has_value(); });
  CHECK_FALSE(w->started.has_value());
  CHECK_FALSE(w->end->exit.has_value());
  CHECK(w->end->reason == "cannot start '" + dir.File("not-executable") + "': Permission denied");
  auto record = ReadSupervisorRecord(dir.File("step.1.status"));
  REQUIRE(record.ok());
  CHECK(record.value()->state == SupervisorRecord::State::kFailedToStart);
}

TEST_CASE("Find: an action still running is watched again; an ended one says how it ended") {
  TempDir dir;
  asio::io_context io;
  const std::string go = dir.File("go");
  auto w = StartAction(io, dir,
                       {"/bin/sh", "-c", "while [ ! -e " + go + " ]; do sleep 0.02; done; exit 5"});
  RunUntil(io, [&] { return w->started.has_value(); });
  std::optional<ActionEnd> end;
  SupervisedAction::Handlers handlers;
  handlers.on_end = [&](const ActionEnd& e) { end = e; };
  // As a later deployd would: from the stored record, or from the status file alone.
  const std::string status = dir.File("step.1.status");
  CHECK(SupervisedAction::Find(io.get_executor(), status, std::nullopt, {}).kind ==
        SupervisedAction::Found::Kind::kAlive);
  SupervisedAction::Found found =
      SupervisedAction::Find(io.get_executor(), status, w->started->supervisor, handlers);
  REQUIRE(found.kind == SupervisedAction::Found::Kind::kAlive);
  CHECK(found.record.action == w->started->action);
  std::ofstream(go) << "";
  RunUntil(io, [&] { return end.has_value() && w->end.has_value(); });
  CHECK(end->reason == "exit status 5");

  found = SupervisedAction::Find(io.get_executor(), status, w->started->supervisor, {});
  CHECK(found.kind == SupervisedAction::Found::Kind::kEnded);
  REQUIRE(found.end.exit.has_value());
  CHECK(found.end.exit->code == 5);

  // No status file: the supervisor never got to starting anything.
  CHECK(SupervisedAction::Find(io.get_executor(), dir.File("never-written.status"),
                               w->started->supervisor, {})
            .kind == SupervisedAction::Found::Kind::kNeverStarted);
}

TEST_CASE("Find: a supervisor caught before its first record is watched by its identity") {
  TempDir dir;
  asio::io_context io;
  SupervisorOptions supervision;
  supervision.status_file = dir.File("step.1.status");
  supervision.log_file = dir.File("step.log");
  // A shell that stops itself and then becomes the supervisor (same pid, same start time): the
  // supervisor as deployd finds it when it died right after starting it.
  SpawnRequest request;
  request.argv = {"/bin/sh", "-c", "kill -STOP $$; exec \"$@\"", "sh"};
  for (const std::string& arg : SupervisorCommand(DEPLOYD_TEST_BIN, supervision))
    request.argv.push_back(arg);
  request.argv.insert(request.argv.end(), {"/bin/sh", "-c", "echo ran; exit 4"});
  Result<Spawned> spawned = Spawn(request);
  REQUIRE(spawned.ok());
  ::close(spawned->pidfd);
  int stopped = 0;
  REQUIRE(::waitpid(spawned->pid, &stopped, WUNTRACED) == spawned->pid);
  REQUIRE(WIFSTOPPED(stopped));
  REQUIRE_FALSE(std::filesystem::exists(supervision.status_file));
  std::optional<ProcessIdentity> supervisor = ProcessIdentity::Of(spawned->pid);
  REQUIRE(supervisor.has_value());

  // Without its identity nothing says it exists; with it, it is awaited.
  CHECK(SupervisedAction::Find(io.get_executor(), supervision.status_file, std::nullopt, {}).kind ==
        SupervisedAction::Found::Kind::kNeverStarted);
  std::optional<ActionEnd> end;
  SupervisedAction::Handlers handlers;
  handlers.on_end = [&](const ActionEnd& e) { end = e; };
  SupervisedAction::Found found =
      SupervisedAction::Find(io.get_executor(), supervision.status_file, supervisor, handlers);
  REQUIRE(found.kind == SupervisedAction::Found::Kind::kAlive);
  CHECK(found.record.action.pid == 0);
  ::kill(spawned->pid, SIGCONT);
  RunUntil(io, [&] {
    int status;
    ::waitpid(spawned->pid, &status, WNOHANG);  // the test is its parent: reap it
    return end.has_value();
  });
  CHECK(end->reason == "exit status 4");
  CHECK(ReadFile(supervision.log_file) == "ran\n");
}
