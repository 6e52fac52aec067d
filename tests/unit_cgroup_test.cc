// Finding a unit's cgroup from a mountinfo (cgroup v2, hybrid, v1; a container's mount root)
// and reading it strictly, on synthetic mountinfo texts and a cgroup tree in a temporary
// directory. The same code against real systemd: tests/systemd/test_service_action.py.
#include "actions/service/unit_cgroup.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "test_support.h"

using namespace deployd;
using deployd::testing::TempDir;

namespace {

const char kUnit[] = "/system.slice/kimi.service";

// A Debian 12 container on a hybrid host (systemd-nspawn, what tests/systemd boots).
const char kHybrid[] =
    "223 284 0:70 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:93 - tmpfs tmpfs ro,mode=755\n"
    "224 223 0:31 / /sys/fs/cgroup/cpuset ro,nosuid,nodev,noexec,relatime shared:94 - cgroup "
    "cgroup rw,cpuset\n"
    "232 223 0:38 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:102 - cgroup2 "
    "cgroup rw\n"
    "233 223 0:37 / /sys/fs/cgroup/systemd rw,nosuid,nodev,noexec,relatime shared:103 - cgroup "
    "cgroup rw,xattr,name=systemd\n";

const char kV2[] =
    "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw\n"
    "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 "
    "rw,nsdelegate,memory_recursiveprot\n";

const char kLegacy[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,xattr,name=systemd\n";

// A container without a cgroup namespace: the mount shows only its own subtree.
const char kDocker[] =
    "700 690 0:26 /docker/1f2e /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup "
    "rw\n";

std::string Dir(std::string_view mountinfo, const std::string& cgroup = kUnit) {
  Result<std::string> dir = CgroupDirectory(mountinfo, cgroup);
  REQUIRE(dir.ok());
  return *dir;
}

std::string DirError(std::string_view mountinfo, const std::string& cgroup = kUnit) {
  Result<std::string> dir = CgroupDirectory(mountinfo, cgroup);
  REQUIRE_FALSE(dir.ok());
  return dir.status().message();
}

// A pid that existed and is gone (reaped): what a stale cgroup.procs may still list.
pid_t GonePid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

}  // namespace

TEST_CASE("A unit's cgroup is found in the hierarchy mountinfo shows", "[unit_cgroup]") {
  CHECK(Dir(kV2) == "/sys/fs/cgroup/system.slice/kimi.service");
  // Hybrid: not /sys/fs/cgroup/system.slice (a tmpfs there), but the cgroup2 mount.
  CHECK(Dir(kHybrid) == "/sys/fs/cgroup/unified/system.slice/kimi.service");
  CHECK(Dir(kLegacy) == "/sys/fs/cgroup/systemd/system.slice/kimi.service");
  CHECK(Dir(kDocker, "/docker/1f2e/system.slice/kimi.service") ==
        "/sys/fs/cgroup/system.slice/kimi.service");
  CHECK(Dir(kDocker, "/docker/1f2e") == "/sys/fs/cgroup");
  // mountinfo escapes a space as \040.
  CHECK(Dir("9 1 0:5 / /mnt/cg\\040v2 rw - cgroup2 none rw\n") ==
        "/mnt/cg v2/system.slice/kimi.service");
}

TEST_CASE("No hierarchy, or a cgroup outside the mount, is an error", "[unit_cgroup]") {
  CHECK(DirError("22 1 259:2 / / rw - ext4 /dev/sda1 rw\n"
                 "35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n") ==
        "no cgroup2 or name=systemd cgroup hierarchy is mounted (/proc/self/mountinfo)");
  CHECK(DirError(kDocker, "/docker/1f2ea/system.slice/kimi.service") ==
        "the cgroup /docker/1f2ea/system.slice/kimi.service is outside every cgroup mount "
        "(cgroup2 at /sys/fs/cgroup shows /docker/1f2e)");
}

TEST_CASE("cgroup.procs is read strictly: unreadable is an error, never empty", "[unit_cgroup]") {
  TempDir tmp;
  const std::string slice = tmp.File("unified/system.slice");
  std::filesystem::create_directories(slice + "/kimi.service");
  const std::string mountinfo =
      "232 223 0:38 / " + tmp.File("unified") + " rw,relatime shared:102 - cgroup2 cgroup rw\n";
  std::string dir = Dir(mountinfo);
  REQUIRE(dir == slice + "/kimi.service");

  SECTION("live pids are named, gone ones are not") {
    tmp.Write("unified/system.slice/kimi.service/cgroup.procs",
              std::to_string(::getpid()) + "\n" + std::to_string(GonePid()) + "\n");
    Result<std::vector<pid_t>> procs = ReadCgroupProcs(dir);
    REQUIRE(procs.ok());
    CHECK(*procs == std::vector<pid_t>{::getpid()});
  }
  SECTION("an empty cgroup") {
    tmp.Write("unified/system.slice/kimi.service/cgroup.procs", "");
    Result<std::vector<pid_t>> procs = ReadCgroupProcs(dir);
    REQUIRE(procs.ok());
    CHECK(procs->empty());
  }
  SECTION("a cgroup that is gone, its slice still there, is empty") {
    Result<std::vector<pid_t>> procs = ReadCgroupProcs(slice + "/gone.service");
    REQUIRE(procs.ok());
    CHECK(procs->empty());
  }
  SECTION("a cgroup whose slice is missing too: the wrong hierarchy") {
    Result<std::vector<pid_t>> procs = ReadCgroupProcs(tmp.File("system.slice/kimi.service"));
    REQUIRE_FALSE(procs.ok());
    CHECK(procs.status().message() == "cannot read " + tmp.File("system.slice/kimi.service") +
                                          "/cgroup.procs: No such file or directory (nor is " +
                                          tmp.File("system.slice") + " there)");
  }
  SECTION("a cgroup.procs that cannot be read") {
    std::filesystem::create_directories(dir + "/cgroup.procs");
    Result<std::vector<pid_t>> procs = ReadCgroupProcs(dir);
    REQUIRE_FALSE(procs.ok());
    CHECK(procs.status().message() == "cannot read " + dir + "/cgroup.procs: Is a directory");
  }
}

TEST_CASE("DEPLOYD_CGROUP_ROOT names the hierarchy; no ControlGroup has no processes",
          "[unit_cgroup]") {
  TempDir tmp;
  std::filesystem::create_directories(tmp.File("system.slice/kimi.service"));
  tmp.Write("system.slice/kimi.service/cgroup.procs", std::to_string(::getpid()) + "\n");
  const char* old = std::getenv("DEPLOYD_CGROUP_ROOT");
  std::string saved = old ? old : "";
  ::setenv("DEPLOYD_CGROUP_ROOT", tmp.path().c_str(), 1);
  Result<std::vector<pid_t>> procs = UnitCgroupProcs(kUnit);
  Result<std::vector<pid_t>> none = UnitCgroupProcs("");
  if (old) {
    ::setenv("DEPLOYD_CGROUP_ROOT", saved.c_str(), 1);
  } else {
    ::unsetenv("DEPLOYD_CGROUP_ROOT");
  }
  REQUIRE(procs.ok());
  CHECK(*procs == std::vector<pid_t>{::getpid()});
  REQUIRE(none.ok());
  CHECK(none->empty());
}
