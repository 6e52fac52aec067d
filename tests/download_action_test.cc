#include "actions/download_action.h"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "process/process_table.h"

using namespace deployd;
namespace fs = std::filesystem;
namespace json = boost::json;

namespace {

// Absolute: the stand-in is linked to from a temporary directory.
const fs::path kStandins = fs::path(DEPLOYD_SOURCE_DIR) / "tests" / "standins";

// An environment variable set for the test and put back afterwards.
class EnvOverride {
 public:
  explicit EnvOverride(const char* name) : name_(name) {
    if (const char* v = std::getenv(name)) saved_ = v;
  }
  ~EnvOverride() {
    if (saved_) {
      ::setenv(name_, saved_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  void Set(const std::string& value) { ::setenv(name_, value.c_str(), 1); }
  void Unset() { ::unsetenv(name_); }

 private:
  const char* name_;
  std::optional<std::string> saved_;
};

// A simulated host for the hf stand-in (tests/standins/hf): $DEPLOYD_SIM_DIR, a bin directory
// first on PATH holding the downloader under `tool_name` (nothing else of the host's own
// Hugging Face tools can be found), no token in the environment, a fast simulated network.
struct HfHost {
  explicit HfHost(const std::string& tool_name = "hf") {
    char pattern[] = "/tmp/deployd-download-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    base = pattern;
    sim = base + "/sim";
    bin = base + "/bin";
    to = base + "/models/m";
    fs::create_directories(sim);
    fs::create_directories(bin);
    if (!tool_name.empty()) fs::create_symlink(kStandins / "hf", bin + "/" + tool_name);
    path.Set(bin + ":/usr/bin:/bin");
    sim_env.Set(sim);
    hf_token.Unset();
    hub_token.Unset();
    Flag("hf-speed", "1000000000");
    ctx.say = [this](std::string_view line) { said.emplace_back(line); };
  }
  ~HfHost() {
    std::error_code ec;
    fs::remove_all(base, ec);  // stand-ins still running exit when their sim dir is gone
  }

  void Flag(const std::string& name, const std::string& content = "") const {
    std::ofstream(sim + "/" + name) << content;
  }
  // What simhost.make_repo writes: a config.json and `shards` safetensors shards.
  void MakeRepo(const std::string& repo, int shards = 2) const {
    std::string key = repo;
    key.replace(key.find('/'), 1, "__");
    fs::create_directories(sim + "/repos/" + key);
    std::ofstream(sim + "/repos/" + key + "/manifest.json")
        << R"({"files": [{"name": "config.json", "content": "{\"model_type\": \"test\"}\n"}],)"
        << R"( "shards": {"count": )" << shards << R"(, "size": 1048576, "prefix": "model"}})";
  }
  // The argv of the last stand-in call, and whether it saw a token.
  json::object LastCall() const {
    std::ifstream in(sim + "/calls.log");
    std::string line, last;
    while (std::getline(in, line)) {
      if (!line.empty()) last = line;
    }
    REQUIRE_FALSE(last.empty());
    return json::parse(last).as_object();
  }
  std::vector<std::string> LastArgv() const {
    std::vector<std::string> out;
    json::object call = LastCall();
    for (const json::value& a : call.at("argv").as_array()) out.emplace_back(a.as_string());
    return out;
  }
  std::string Said() const {
    std::string all;
    for (const std::string& line : said) all += line + "\n";
    return all;
  }
  bool SaidLine(const std::string& line) const {
    return std::find(said.begin(), said.end(), line) != said.end();
  }

  EnvOverride path{"PATH"};
  EnvOverride sim_env{"DEPLOYD_SIM_DIR"};
  EnvOverride hf_token{"HF_TOKEN"};
  EnvOverride hub_token{"HUGGING_FACE_HUB_TOKEN"};
  std::string base, sim, bin, to;
  std::vector<std::string> said;
  ActionContext ctx;
};

DownloadAction Action(const HfHost& host, const std::string& repo = "org/model") {
  DownloadAction action;
  action.repo = repo;
  action.to = host.to;
  return action;
}

void WriteFile(const std::string& path, const std::string& content = "") {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path) << content;
}

}  // namespace

TEST_CASE("download: a whole repository lands under `to` and the summary counts it",
          "[download_action]") {
  HfHost host;
  host.MakeRepo("org/model");
  DownloadAction action = Action(host);

  Status status = RunDownloadAction(action, host.ctx);
  INFO(host.Said());
  REQUIRE(status.ok());
  CHECK(fs::file_size(host.to + "/model-00001-of-00002.safetensors") == 1048576);
  CHECK(fs::file_size(host.to + "/model-00002-of-00002.safetensors") == 1048576);
  CHECK(fs::exists(host.to + "/config.json"));
  CHECK(fs::exists(host.to + "/model.safetensors.index.json"));
  CHECK(host.LastArgv() ==
        std::vector<std::string>{"download", "org/model", "--local-dir", host.to});
  CHECK(host.SaidLine("running hf download org/model --local-dir " + host.to));
  // The downloader's own lines are relayed, its \r-redrawn bar as separate lines.
  CHECK(host.SaidLine("Download complete. Moving file to " + host.to + "/config.json"));
  CHECK(std::count_if(host.said.begin(), host.said.end(), [](const std::string& l) {
          return l.starts_with("Fetching 4 files:");
        }) >= 2);
  REQUIRE_FALSE(host.said.empty());
  CHECK(host.said.back().starts_with("downloaded org/model into " + host.to +
                                     ": 4 files, 2.0MiB in "));
}

TEST_CASE("download: a second run finds the files there and completes", "[download_action]") {
  HfHost host;
  host.MakeRepo("org/model", 1);
  REQUIRE(RunDownloadAction(Action(host), host.ctx).ok());
  host.said.clear();
  Status again = RunDownloadAction(Action(host), host.ctx);
  INFO(host.Said());
  REQUIRE(again.ok());
  CHECK(host.Said().find("Downloading '") == std::string::npos);
}

TEST_CASE("download: revision and patterns reach hf, each pattern after its own flag",
          "[download_action]") {
  HfHost host;
  host.MakeRepo("org/model");
  DownloadAction action = Action(host);
  action.revision = "main";
  action.include = {"*.json", "*.safetensors"};
  action.exclude = {"*-00002-of-*"};

  Status status = RunDownloadAction(action, host.ctx);
  INFO(host.Said());
  REQUIRE(status.ok());
  CHECK(host.LastArgv() == std::vector<std::string>{"download", "org/model", "--local-dir", host.to,
                                                    "--revision", "main", "--include", "*.json",
                                                    "--include", "*.safetensors", "--exclude",
                                                    "*-00002-of-*"});
  CHECK(fs::exists(host.to + "/model-00001-of-00002.safetensors"));
  CHECK_FALSE(fs::exists(host.to + "/model-00002-of-00002.safetensors"));
}

TEST_CASE("download: hf 0.x gets its patterns as one list", "[download_action]") {
  HfHost host;
  host.MakeRepo("org/model");
  host.Flag("hf-version", "0.36.0");
  DownloadAction action = Action(host);
  action.include = {"*.json", "*.safetensors"};

  Status status = RunDownloadAction(action, host.ctx);
  INFO(host.Said());
  REQUIRE(status.ok());
  CHECK(host.LastArgv() == std::vector<std::string>{"download", "org/model", "--local-dir", host.to,
                                                    "--include", "*.json", "*.safetensors"});
}

TEST_CASE("download: the token reaches hf through the environment, never argv",
          "[download_action]") {
  HfHost host;
  host.MakeRepo("org/model", 1);
  host.Flag("hf-gated");  // passes only with a token
  host.hf_token.Set("hf_sEcReTtOkEn1234");

  Status status = RunDownloadAction(Action(host), host.ctx);
  INFO(host.Said());
  REQUIRE(status.ok());
  json::object call = host.LastCall();
  CHECK(call.at("hf_token").as_bool());
  CHECK(json::serialize(call.at("argv")).find("--token") == std::string::npos);
  std::ifstream in(host.sim + "/calls.log");
  std::stringstream log;
  log << in.rdbuf();
  CHECK(log.str().find("hf_sEcReTtOkEn1234") == std::string::npos);
  CHECK(host.Said().find("hf_sEcReTtOkEn1234") == std::string::npos);
}

TEST_CASE("download: a gated repository without a token fails, saying to set HF_TOKEN",
          "[download_action]") {
  HfHost host;
  host.MakeRepo("org/gated", 1);
  host.Flag("hf-gated");

  Status status = RunDownloadAction(Action(host, "org/gated"), host.ctx);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() ==
        "repository org/gated is gated or needs a token: set HF_TOKEN in the plan's secrets: "
        "Cannot access gated repo for url "
        "https://huggingface.co/api/models/org/gated/revision/main.");
  CHECK(std::any_of(host.said.begin(), host.said.end(), [](const std::string& l) {
    return l.starts_with("huggingface_hub.errors.GatedRepoError: 401 Client Error.");
  }));
}

TEST_CASE("download: a token without access to a gated repository says to request it",
          "[download_action]") {
  HfHost host;
  host.MakeRepo("org/gated", 1);
  host.Flag("hf-gated", "deny");
  host.hf_token.Set("hf_sEcReTtOkEn1234");

  Status status = RunDownloadAction(Action(host, "org/gated"), host.ctx);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() ==
        "repository org/gated is gated and the token's account has not been granted access: "
        "request it at https://huggingface.co/org/gated: Access to model org/gated is restricted "
        "and you are not in the authorized list. Visit https://huggingface.co/org/gated to ask "
        "for access.");
}

TEST_CASE("download: a repository that does not exist", "[download_action]") {
  HfHost host;
  SECTION("without a token") {
    Status status = RunDownloadAction(Action(host, "org/missing"), host.ctx);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() ==
          "repository org/missing was not found, or is private and needs a token (set HF_TOKEN "
          "in the plan's secrets): Repository Not Found for url: "
          "https://huggingface.co/api/models/org/missing/revision/main.");
  }
  SECTION("with a token") {
    host.hf_token.Set("hf_sEcReTtOkEn1234");
    Status status = RunDownloadAction(Action(host, "org/missing"), host.ctx);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() ==
          "repository org/missing was not found (or the token cannot see it): Repository Not "
          "Found for url: https://huggingface.co/api/models/org/missing/revision/main.");
  }
}

TEST_CASE("download: no space left on the device is named with the free space",
          "[download_action]") {
  HfHost host;
  host.MakeRepo("org/model");
  host.Flag("hf-no-space");

  Status status = RunDownloadAction(Action(host), host.ctx);
  REQUIRE_FALSE(status.ok());
  std::string prefix = "no space left on device under " + host.to + " (";
  CHECK(status.message().starts_with(prefix));
  CHECK(status.message().ends_with(" free): OSError: [Errno 28] No space left on device"));
}

TEST_CASE("download: other failures name the status and the last line; 416 the .incomplete",
          "[download_action]") {
  HfHost host("");
  auto fake_hf = [&](const std::string& body) {
    std::ofstream(host.bin + "/hf") << "#!/bin/sh\n" << body << "\n";
    fs::permissions(host.bin + "/hf", fs::perms::owner_all);
  };
  SECTION("a plain failure") {
    fake_hf(
        "echo 'Fetching 3 files:   0%|          | 0/3'; echo 'ConnectionError: reset' >&2; exit 3");
    Status status = RunDownloadAction(Action(host), host.ctx);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() == "hf exited with status 3: ConnectionError: reset");
  }
  SECTION("nothing printed") {
    fake_hf("exit 2");
    Status status = RunDownloadAction(Action(host), host.ctx);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() == "hf exited with status 2 and printed nothing");
  }
  SECTION("a refused resume") {
    fake_hf(
        "echo 'requests.exceptions.HTTPError: 416 Client Error: Range Not Satisfiable for url: "
        "https://huggingface.co/org/model/resolve/main/model.safetensors' >&2; echo 'x' >&2; "
        "exit 1");
    Status status = RunDownloadAction(Action(host), host.ctx);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() ==
          "hf exited with status 1: the server refused to resume a partial download (416); "
          "delete the stale .incomplete files under " +
              host.to +
              "/.cache/huggingface/download and run it again: requests.exceptions.HTTPError: "
              "416 Client Error: Range Not Satisfiable for url: "
              "https://huggingface.co/org/model/resolve/main/model.safetensors");
  }
}

TEST_CASE("download: progress bar redraws reach the log at most once a second per bar",
          "[download_action]") {
  HfHost host("");
  // 500 redraws of two bars in well under a second, as tqdm does with \r, then both at 100%.
  std::ofstream(host.bin + "/hf") << "#!/usr/bin/env python3\n"
                                     "import sys\n"
                                     "for i in range(500):\n"
                                     "    for name in ('a.safetensors', 'b.safetensors'):\n"
                                     "        sys.stdout.write('%s: %3d%%|#   | %d/1000 "
                                     "[00:01<00:09]\\r' % (name, i // 10, i))\n"
                                     "sys.stdout.write('a.safetensors: 100%|####| 1000/1000\\n')\n"
                                     "sys.stdout.write('b.safetensors: 100%|####| 1000/1000\\n')\n"
                                     "print('Download complete.')\n";
  fs::permissions(host.bin + "/hf", fs::perms::owner_all);
  Status status = RunDownloadAction(Action(host), host.ctx);
  REQUIRE(status.ok());
  auto count = [&](const std::string& prefix) {
    return std::count_if(host.said.begin(), host.said.end(),
                         [&](const std::string& l) { return l.starts_with(prefix); });
  };
  // The first redraw of each bar, perhaps one more if the machine is slow, and the last.
  CHECK(count("a.safetensors:") >= 2);
  CHECK(count("a.safetensors:") < 20);
  CHECK(count("b.safetensors:") < 20);
  CHECK(host.SaidLine("a.safetensors: 100%|####| 1000/1000"));
  CHECK(host.SaidLine("b.safetensors: 100%|####| 1000/1000"));
  CHECK(host.SaidLine("Download complete."));
}

TEST_CASE("download: huggingface-cli when hf is absent, with its list syntax",
          "[download_action]") {
  HfHost host("huggingface-cli");
  host.MakeRepo("org/model");
  DownloadAction action = Action(host);
  action.include = {"*.json", "*.safetensors"};
  action.exclude = {"*-00002-of-*"};

  REQUIRE(ResolveDownloader(host.bin + ":/usr/bin:/bin").value() == "huggingface-cli");
  Status status = RunDownloadAction(action, host.ctx);
  INFO(host.Said());
  REQUIRE(status.ok());
  CHECK(host.SaidLine("running huggingface-cli download org/model --local-dir " + host.to +
                      " --include '*.json' '*.safetensors' --exclude '*-00002-of-*'"));
  CHECK(host.LastArgv() == std::vector<std::string>{"download", "org/model", "--local-dir", host.to,
                                                    "--include", "*.json", "*.safetensors",
                                                    "--exclude", "*-00002-of-*"});
  CHECK(fs::exists(host.to + "/model-00001-of-00002.safetensors"));
}

TEST_CASE("download: ResolveDownloader prefers hf and names both when neither is there",
          "[download_action]") {
  HfHost host("");
  std::string a = host.base + "/a", b = host.base + "/b";
  fs::create_directories(a);
  fs::create_directories(b);
  fs::create_symlink(kStandins / "hf", b + "/hf");
  fs::create_symlink(kStandins / "hf", a + "/huggingface-cli");
  WriteFile(a + "/hf");  // not executable: not a candidate

  CHECK(ResolveDownloader(a + "::" + b).value() == "hf");
  CHECK(ResolveDownloader(a).value() == "huggingface-cli");
  Result<std::string> none = ResolveDownloader(host.bin + ":" + host.base);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message() ==
        "neither hf nor huggingface-cli is on PATH (" + host.bin + ":" + host.base +
            "): install huggingface_hub for deployd's user, or add its bin directory to "
            "deployd's PATH");

  Status status = RunDownloadAction(Action(host), host.ctx);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() == "neither hf nor huggingface-cli is on PATH (" + host.bin +
                                ":/usr/bin:/bin): install huggingface_hub for deployd's user, "
                                "or add its bin directory to deployd's PATH");
}

TEST_CASE("download: DownloadArgv", "[download_action]") {
  DownloadAction action;
  action.repo = "nvidia/Kimi-K2.5-NVFP4";
  action.to = "/models/kimi";
  CHECK(DownloadArgv("hf", action) == std::vector<std::string>{"hf", "download",
                                                               "nvidia/Kimi-K2.5-NVFP4",
                                                               "--local-dir", "/models/kimi"});
  action.include = {"*.safetensors"};
  action.exclude = {"*.bin", "*.pt"};
  CHECK(DownloadArgv("hf", action, PatternSyntax::kList) ==
        std::vector<std::string>{"hf", "download", "nvidia/Kimi-K2.5-NVFP4", "--local-dir",
                                 "/models/kimi", "--include", "*.safetensors", "--exclude", "*.bin",
                                 "*.pt"});
  CHECK(HfPatternSyntax("huggingface_hub version: 0.36.0\n") == PatternSyntax::kList);
  CHECK(HfPatternSyntax("huggingface_hub version: 1.4.1\n") == PatternSyntax::kRepeated);
  CHECK(HfPatternSyntax("something else") == PatternSyntax::kRepeated);
}

TEST_CASE("download: too little space for `size` fails before hf starts", "[download_action]") {
  HfHost host;
  host.MakeRepo("org/model");
  DownloadAction action = Action(host);
  action.size = std::uint64_t{1} << 60;

  Status status = RunDownloadAction(action, host.ctx);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message().starts_with("not enough space under " + host.to +
                                     " for org/model: needs 1EiB, "));
  CHECK(status.message().ends_with(" free and 0B already there"));
  CHECK_FALSE(fs::exists(host.sim + "/calls.log"));
  CHECK(fs::is_directory(host.to));
}

TEST_CASE("download: stale locks are swept, held ones kept", "[download_action]") {
  HfHost host;
  std::string meta = host.to + "/.cache/huggingface/download";
  WriteFile(meta + "/stale.safetensors.lock");
  WriteFile(meta + "/sub/dir/stale2.lock");
  WriteFile(meta + "/held.lock");
  WriteFile(meta + "/model.safetensors.metadata");
  WriteFile(host.to + "/not-hf.lock");  // outside huggingface_hub's directory
  // This test process is a live holder, as hf is of the lock it flock()s.
  int fd = ::open((meta + "/held.lock").c_str(), O_RDWR | O_CLOEXEC);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX) == 0);

  std::vector<std::string> swept = SweepStaleLocks(host.to);
  ::close(fd);
  CHECK(swept ==
        std::vector<std::string>{meta + "/stale.safetensors.lock", meta + "/sub/dir/stale2.lock"});
  CHECK(fs::exists(meta + "/held.lock"));
  CHECK(fs::exists(meta + "/model.safetensors.metadata"));
  CHECK(fs::exists(host.to + "/not-hf.lock"));
  CHECK_FALSE(fs::exists(meta + "/stale.safetensors.lock"));
  CHECK(SweepStaleLocks(host.base + "/nowhere").empty());
}

TEST_CASE("download: a SoftFileLock left by a killed download is swept before hf waits on it",
          "[download_action]") {
  HfHost host;
  host.MakeRepo("org/model", 1);
  host.Flag("hf-soft-lock");  // an existing lock file blocks hf forever
  std::string lock = host.to + "/.cache/huggingface/download/config.json.lock";
  WriteFile(lock);

  Status status = RunDownloadAction(Action(host), host.ctx);
  INFO(host.Said());
  REQUIRE(status.ok());
  CHECK(
      host.SaidLine("removed 1 stale lock file that no process holds (left by an interrupted "
                    "download): " +
                    lock));
  CHECK(fs::exists(host.to + "/config.json"));
}

TEST_CASE("download: SIGTERM is forwarded to hf, which runs in our process group",
          "[download_action]") {
  HfHost host;
  host.MakeRepo("org/model");
  host.Flag("hf-stall-once");  // hf hangs mid-file until stopped
  std::optional<pid_t> downloader_pgid;
  host.ctx.say = [&](std::string_view line) {
    host.said.emplace_back(line);
    if (!line.starts_with("Downloading 'model-00001")) return;
    auto pid = static_cast<pid_t>(host.LastCall().at("pid").as_int64());
    if (auto stat = ReadProcStat(pid)) downloader_pgid = stat->pgid;
    // SIGTERM is blocked in this thread while hf runs: it stays pending for the action.
    ::raise(SIGTERM);
  };

  Status status = RunDownloadAction(Action(host), host.ctx);
  INFO(host.Said());
  REQUIRE_FALSE(status.ok());
  CHECK(downloader_pgid == ::getpgrp());
  CHECK(std::any_of(host.said.begin(), host.said.end(), [](const std::string& l) {
    return l.starts_with("SIGTERM received: stopping hf (pid ");
  }));
  CHECK(status.message().starts_with("hf was killed by SIGTERM: "));
  // The signal was consumed: the mask is back and nothing is pending.
  sigset_t pending;
  sigpending(&pending);
  CHECK_FALSE(sigismember(&pending, SIGTERM));
}
