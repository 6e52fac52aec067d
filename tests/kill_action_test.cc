// The `kill` action and the `process` probe against real process trees. Every pattern carries
// a token unique to this test process (action_test_helpers.h), so nothing else is signalled.
#include "actions/kill_action.h"

#include <sys/prctl.h>

#include <algorithm>

#include "action_test_helpers.h"
#include "actions/process_probe.h"

using namespace deployd;
using namespace deployd::testing;

namespace {

pid_t MemberTitled(pid_t pgid, const std::string& title) {
  for (const ProcessInfo& p : GroupMembers(pgid)) {
    if (p.Title() == title) return p.pid();
  }
  return 0;
}

Check ProcessCheck(const std::string& match, bool absent) {
  Check check;
  check.kind = CheckKind::kProcess;
  check.match = match;
  check.absent = absent;
  return check;
}

}  // namespace

TEST_CASE("kill: a vLLM-like tree goes down, renamed workers and a SIGTERM-ignoring one too",
          "[kill_action]") {
  TempDir dir;
  std::string token = Token("tree");
  Tree tree;
  StartTree(tree, dir, {"tree", token}, 3);
  pid_t leader = tree.leader;
  pid_t tp0 = MemberTitled(leader, "VLLM::Worker_TP0");
  pid_t tp1 = MemberTitled(leader, "VLLM::Worker_TP1");
  REQUIRE(tp0 > 0);
  REQUIRE(tp1 > 0);
  REQUIRE(ReadProcStat(tp0)->comm == "VLLM::Worker_TP");

  KillAction action;
  action.match = token;  // only the "API server" matches; its group brings the workers
  action.grace = std::chrono::seconds(1);
  Said said;
  Status status = RunKillAction(action, said.ctx);
  INFO(said.All());
  REQUIRE(status.ok());

  std::string group = ", group " + std::to_string(leader);
  std::string leader_name = "pid " + std::to_string(leader) + " (python3)";
  std::string tp0_name = "pid " + std::to_string(tp0) + " (VLLM::Worker_TP0)";
  std::string tp1_name = "pid " + std::to_string(tp1) + " (VLLM::Worker_TP1)";
  CHECK(said.Has("SIGTERM " + leader_name + group));
  CHECK(said.Has("SIGTERM " + tp0_name + group));
  CHECK(said.Has("SIGTERM " + tp1_name + group));
  CHECK(said.Has("1 process still running after 1s: SIGKILL"));
  CHECK(said.Has("SIGKILL " + tp1_name + group));
  CHECK_FALSE(said.HasPrefix("SIGKILL " + tp0_name));
  CHECK(said.lines.back() == "3 processes stopped: 2 by SIGTERM, 1 by SIGKILL after 1s");

  CHECK_FALSE(Alive(leader));
  CHECK_FALSE(Alive(tp0));
  CHECK_FALSE(Alive(tp1));
  CHECK(GroupMembers(leader).empty());
  int wait_status = 0;
  REQUIRE(::waitpid(leader, &wait_status, 0) == leader);
  tree.leader = 0;
  CHECK(WIFSIGNALED(wait_status));
  CHECK(WTERMSIG(wait_status) == SIGTERM);
}

TEST_CASE("kill: a retitled process is found by its title, and alone without whole_groups",
          "[kill_action]") {
  TempDir dir;
  std::string title = "VLLM::EngineCore_" + Token("title");
  Tree tree;
  StartTree(tree, dir, {"title", Token("title-arg"), title}, 1);
  auto info = ReadProcess(tree.leader);
  REQUIRE(info.has_value());
  REQUIRE(info->CommandLine() == title);  // the token of argv is gone: only the title matches

  KillAction action;
  action.match = "^" + title + "$";
  action.whole_groups = false;
  Said said;
  REQUIRE(RunKillAction(action, said.ctx).ok());
  INFO(said.All());
  std::string name = "pid " + std::to_string(tree.leader) + " (" + title + ")";
  CHECK(said.lines ==
        std::vector<std::string>{"SIGTERM " + name + ", group " + std::to_string(tree.leader),
                                 "1 process stopped by SIGTERM"});
  CHECK_FALSE(Alive(tree.leader));
}

TEST_CASE("kill: no match is success, and says so", "[kill_action]") {
  KillAction action;
  action.match = "^no-such-process-" + Token("none") + "$";
  Said said;
  REQUIRE(RunKillAction(action, said.ctx).ok());
  CHECK(said.lines == std::vector<std::string>{"no process matches '" + action.match + "'"});
}

TEST_CASE("kill: an invalid pattern is the step's error", "[kill_action]") {
  KillAction action;
  action.match = "VLLM::(";
  Said said;
  Status status = RunKillAction(action, said.ctx);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message().rfind("invalid pattern 'VLLM::(': ", 0) == 0);
  CHECK(said.lines.empty());
}

TEST_CASE("kill: a process running deployd's own binary is never signalled", "[kill_action]") {
  // A fork of this test binary (for the library, the deployd binary: /proc/self/exe), named so
  // that only it matches: comm holds 15 characters, the pid makes it unique on the host.
  std::string comm = "dk" + std::to_string(::getpid());
  comm.resize(std::min<size_t>(comm.size(), 15));
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
    ::close(fds[0]);
    (void)!::write(fds[1], "r", 1);
    for (;;) ::pause();
  }
  ::close(fds[1]);
  char c = 0;
  REQUIRE(::read(fds[0], &c, 1) == 1);
  ::close(fds[0]);

  KillAction action;
  action.match = "^" + comm + "$";
  Said said;
  Status status = RunKillAction(action, said.ctx);
  bool alive = Alive(child);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  INFO(said.All());
  REQUIRE(status.ok());
  CHECK(alive);
  REQUIRE(said.lines.size() == 2);
  CHECK(said.lines[0].rfind("not signalling pid " + std::to_string(child) + " (", 0) == 0);
  CHECK(said.lines[0].find("): runs the deployd binary") != std::string::npos);
  CHECK(said.lines[1] == "no process matches '" + action.match + "' besides those never signalled");
}

TEST_CASE("process probe: present and absent, both ways", "[kill_action]") {
  TempDir dir;
  std::string token = Token("probe");
  std::string missing = "^no-such-process-" + Token("probe-none") + "$";

  SECTION("nothing runs") {
    CheckOutcome present = ProbeProcess(ProcessCheck(missing, false));
    CHECK_FALSE(present.passed);
    CHECK(present.summary == "process '" + missing + "': none running");
    CHECK(present.evidence.at("check") == "process");
    CHECK(present.evidence.at("count") == 0);
    CheckOutcome absent = ProbeProcess(ProcessCheck(missing, true));
    CHECK(absent.passed);
    CHECK(absent.summary == "process '" + missing + "': none running");
  }
  SECTION("a retitled process runs") {
    std::string title = "VLLM::Worker_TP0_" + token;
    Tree tree;
    StartTree(tree, dir, {"title", token, title}, 1);
    std::string seen = "process '" + title + "': 1 running: pid " + std::to_string(tree.leader) +
                       " (" + title + ")";
    CheckOutcome present = ProbeProcess(ProcessCheck(title, false));
    CHECK(present.passed);
    CHECK(present.summary == seen);
    CHECK(present.evidence.at("processes").as_array().at(0).at("pid") == tree.leader);
    CheckOutcome absent = ProbeProcess(ProcessCheck(title, true));
    CHECK_FALSE(absent.passed);
    CHECK(absent.summary == seen);
  }
  SECTION("more than five are named five, with a count") {
    Tree tree;
    StartTree(tree, dir, {"many", token, "7"}, 7);
    CheckOutcome present = ProbeProcess(ProcessCheck(token, false));
    CHECK(present.passed);
    std::vector<pid_t> pids;
    for (const ProcessInfo& p : GroupMembers(tree.leader)) pids.push_back(p.pid());
    REQUIRE(pids.size() == 7);
    std::string names;
    for (size_t i = 0; i < 5; ++i) {
      names += (i ? ", pid " : "pid ") + std::to_string(pids[i]) + " (python3)";
    }
    CHECK(present.summary == "process '" + token + "': 7 running: " + names + " and 2 more");
    CHECK(present.evidence.at("count") == 7);
  }
  SECTION("an invalid pattern fails the check with the reason") {
    CheckOutcome outcome = ProbeProcess(ProcessCheck("(", false));
    CHECK_FALSE(outcome.passed);
    CHECK(outcome.summary.rfind("process '(': invalid pattern '(': ", 0) == 0);
  }
}
