#include "process/process_table.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>

using namespace deployd;

namespace {

std::string TempDir() {
  char pattern[] = "/tmp/deployd-proc-test-XXXXXX";
  char* dir = ::mkdtemp(pattern);
  REQUIRE(dir != nullptr);
  return dir;
}

void WriteFile(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// Fields 3..22 and a few more of a real stat line; start time (field 22) is 98765.
std::string StatLine(pid_t pid, std::string_view comm, char state, pid_t ppid, pid_t pgid) {
  return std::to_string(pid) + " (" + std::string(comm) + ") " + state + " " +
         std::to_string(ppid) + " " + std::to_string(pgid) + " " + std::to_string(pgid) +
         " 0 -1 4194560 110 0 0 0 1 2 0 0 20 0 1 0 98765 10551296 880 18446744073709551615\n";
}

}  // namespace

TEST_CASE("ParseProcStat: fields by number, comm with spaces and parentheses") {
  auto stat = ParseProcStat(StatLine(4242, "a) (b c", 'D', 17, 4200));
  REQUIRE(stat.ok());
  CHECK(stat->pid == 4242);
  CHECK(stat->comm == "a) (b c");
  CHECK(stat->state == 'D');
  CHECK(stat->ppid == 17);
  CHECK(stat->pgid == 4200);
  CHECK(stat->sid == 4200);
  CHECK(stat->start_time == 98765);

  auto truncated = ParseProcStat("4242 (sleep) S 1 4242 4242 0 -1 4194560 110 0");
  REQUIRE_FALSE(truncated.ok());
  CHECK(truncated.status().message() == "malformed /proc stat: field 22");
  CHECK(ParseProcStat("4242 sleep S").status().message() == "malformed /proc stat: no (comm)");
}

TEST_CASE("ParseCmdline: NUL-separated, setproctitle padding dropped, empty args kept") {
  using namespace std::string_literals;
  CHECK(ParseCmdline("vllm\0serve\0/models/x\0"s) ==
        std::vector<std::string>{"vllm", "serve", "/models/x"});
  CHECK(ParseCmdline("sh\0-c\0\0x\0"s) == std::vector<std::string>{"sh", "-c", "", "x"});
  CHECK(ParseCmdline("VLLM::Worker_TP0\0\0\0\0\0\0"s) ==
        std::vector<std::string>{"VLLM::Worker_TP0"});
  CHECK(ParseCmdline("") == std::vector<std::string>{});
}

TEST_CASE("ProcessInfo: command line and title") {
  ProcessInfo info;
  info.stat.comm = "python3";
  info.argv = {"/usr/bin/python3", "-m", "vllm.entrypoints.openai.api_server"};
  CHECK(info.CommandLine() == "/usr/bin/python3 -m vllm.entrypoints.openai.api_server");
  CHECK(info.Title() == "python3");
  info.stat.comm = "VLLM::Worker_TP";  // comm keeps 15 characters
  info.argv = {"VLLM::Worker_TP0"};
  CHECK(info.Title() == "VLLM::Worker_TP0");
  info.argv = {"sglang::scheduler tp0 /a/b"};
  CHECK(info.Title() == "sglang::scheduler tp0 /a/b");
  info.argv = {};
  info.stat.comm = "kworker/0:1";
  CHECK(info.CommandLine() == "[kworker/0:1]");
  CHECK(info.Title() == "kworker/0:1");
  CHECK(info.IsKernelThread());
}

TEST_CASE("ReadProcess: this process, and a pid that is gone") {
  auto self = ReadProcess(::getpid());
  REQUIRE(self.has_value());
  CHECK(self->stat.ppid == ::getppid());
  CHECK(self->stat.pgid == ::getpgrp());
  CHECK(self->stat.state == 'R');
  CHECK(self->stat.start_time > 0);
  CHECK_FALSE(self->argv.empty());

  pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  ::waitpid(child, nullptr, 0);
  CHECK_FALSE(ReadProcess(child).has_value());
  CHECK_FALSE(ReadProcStat(child).has_value());
}

TEST_CASE("ProcessTable: a /proc-like tree, with vanished and inconsistent entries are left out") {
  std::string root = TempDir();
  auto add = [&](pid_t pid, const std::string& stat, std::optional<std::string> cmdline) {
    std::string dir = root + "/" + std::to_string(pid);
    ::mkdir(dir.c_str(), 0755);
    WriteFile(dir + "/stat", stat);
    if (cmdline) WriteFile(dir + "/cmdline", *cmdline);
  };
  using namespace std::string_literals;
  add(1, StatLine(1, "init", 'S', 0, 1), "/sbin/init\0"s);
  add(100, StatLine(100, "VLLM::EngineCor", 'S', 1, 100), "VLLM::EngineCore\0\0\0"s);
  add(101, StatLine(101, "VLLM::Worker_TP", 'D', 100, 100), "VLLM::Worker_TP0\0"s);
  add(200, StatLine(200, "gone", 'S', 1, 200), std::nullopt);  // exited between the two reads
  add(300, StatLine(301, "other", 'S', 1, 300), "x\0"s);       // not the pid it claims
  ::mkdir((root + "/net").c_str(), 0755);

  auto table = ProcessTable::Read(root);
  REQUIRE(table.ok());
  REQUIRE(table->processes().size() == 3);
  const ProcessInfo* worker = table->Find(101);
  REQUIRE(worker != nullptr);
  CHECK(worker->stat.state == 'D');
  CHECK(worker->Title() == "VLLM::Worker_TP0");
  CHECK(table->Find(100)->argv == std::vector<std::string>{"VLLM::EngineCore"});
  CHECK(table->Find(200) == nullptr);
  CHECK(table->AncestorsOf(101) == std::vector<pid_t>{100, 1});
  std::system(("rm -rf " + root).c_str());

  auto missing = ProcessTable::Read("/nonexistent-proc");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().message() == "cannot list /nonexistent-proc: No such file or directory");
}

TEST_CASE("ProcessTable: the real /proc holds this process and its ancestors") {
  auto table = ProcessTable::Read();
  REQUIRE(table.ok());
  REQUIRE(table->Find(::getpid()) != nullptr);
  auto ancestors = table->AncestorsOf(::getpid());
  REQUIRE_FALSE(ancestors.empty());
  CHECK(ancestors.front() == ::getppid());
}
