#include "actions/guarded_remove.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "util/units.h"

using namespace deployd;
namespace fs = std::filesystem;

namespace {

// /tmp/deployd-remove-XXXXXX with two allowed roots (shared, models) and a directory outside
// them (data), all removed when the test ends.
struct Sandbox {
  Sandbox() {
    char pattern[] = "/tmp/deployd-remove-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    base = pattern;
    fs::create_directories(base + "/shared");
    fs::create_directories(base + "/models");
    fs::create_directories(base + "/data");
    options.allowed_roots = {base + "/shared", base + "/models"};
  }
  ~Sandbox() {
    std::error_code ec;
    fs::remove_all(base, ec);
  }
  std::string Roots() const { return "(" + base + "/shared, " + base + "/models)"; }

  std::string base;
  RemoveOptions options;
};

void WriteFile(const std::string& path, std::size_t size) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << std::string(size, 'w');
}

std::uint64_t Allocated(const std::string& path) {
  struct stat st;
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

// The refusal message for `path`. CheckRemovable must refuse before RemovePath is even tried:
// these are real system paths and the tests may run as root.
std::string Refusal(const std::string& path, const RemoveOptions& options) {
  Status check = CheckRemovable(path, options);
  REQUIRE_FALSE(check.ok());
  Result<RemoveOutcome> removed = RemovePath(path, options);
  REQUIRE_FALSE(removed.ok());
  CHECK(removed.status().message() == check.message());
  return removed.status().message();
}

}  // namespace

TEST_CASE("remove: the root and top-level system directories are refused") {
  RemoveOptions none;
  CHECK(Refusal("/", none) == "refusing to remove /: the root directory");
  CHECK(Refusal("//", none) == "refusing to remove //: the root directory");
  CHECK(Refusal("/usr", none) == "refusing to remove /usr: a top-level system directory");
  CHECK(Refusal("/usr/", none) == "refusing to remove /usr/: a top-level system directory");
  CHECK(Refusal("/./etc", none) == "refusing to remove /./etc: a top-level system directory");
  for (const char* dir :
       {"/bin", "/sbin", "/lib", "/lib64", "/lib32", "/boot", "/dev", "/proc", "/sys", "/run",
        "/var", "/home", "/root", "/opt", "/srv", "/tmp", "/mnt", "/media"}) {
    CHECK(Refusal(dir, none) ==
          std::string("refusing to remove ") + dir + ": a top-level system directory");
  }
}

TEST_CASE("remove: relative paths and '..' are refused") {
  RemoveOptions none;
  CHECK(Refusal("", none) == "refusing to remove an empty path");
  CHECK(Refusal("models/x", none) == "refusing to remove models/x: a relative path");
  CHECK(Refusal("/srv/models/../etc", none) ==
        "refusing to remove /srv/models/../etc: the path has '..' components");
  CHECK(Refusal("/srv/models/..", none) ==
        "refusing to remove /srv/models/..: the path has '..' components");
}

TEST_CASE("remove: the state directory, what is in it and what contains it are refused") {
  RemoveOptions options;
  options.state_dir = "/var/lib/deployd";
  CHECK(Refusal("/var/lib/deployd/x", options) ==
        "refusing to remove /var/lib/deployd/x: inside deployd's state directory");
  CHECK(Refusal("/var/lib/deployd", options) ==
        "refusing to remove /var/lib/deployd: deployd's state directory");
  CHECK(Refusal("/var/lib", options) ==
        "refusing to remove /var/lib: contains deployd's state directory");
}

TEST_CASE("remove: paths outside the allowed roots are refused") {
  RemoveOptions options;
  options.allowed_roots = {"/shared", "/models"};
  CHECK(Refusal("/data/x", options) ==
        "refusing to remove /data/x: outside the allowed roots (/shared, /models)");
  CHECK(Refusal("/sharedx/y", options) ==
        "refusing to remove /sharedx/y: outside the allowed roots (/shared, /models)");
  CHECK(Refusal("/shared", options) ==
        "refusing to remove /shared: an allowed root itself; name what is inside it");
  options.allowed_roots = {"shared"};
  CHECK(Refusal("/shared/x", options) ==
        "allowed root shared is not an absolute path without '..'");
}

TEST_CASE("remove: with no allowed roots configured nothing is removed") {
  Sandbox box;
  std::string tree = box.base + "/shared/glm5";
  WriteFile(tree + "/a.gguf", 100);
  RemoveOptions none;
  const std::string why =
      ": no allowed_roots configured; nothing may be deleted until deployd's configuration "
      "sets them (e.g. allowed_roots: [/shared])";
  CHECK(Refusal(tree, none) == "refusing to remove " + tree + why);
  CHECK(fs::exists(tree + "/a.gguf"));
  // An absent path too: the plan would delete it once it exists.
  CHECK(Refusal(box.base + "/shared/absent", none) ==
        "refusing to remove " + box.base + "/shared/absent" + why);
  // The fixed refusals come first: they say more.
  CHECK(Refusal("/etc", none) == "refusing to remove /etc: a top-level system directory");
}

TEST_CASE("remove: a tree is removed and the space it held reported") {
  Sandbox box;
  std::string tree = box.base + "/shared/glm5";
  WriteFile(tree + "/a.gguf", 100'000);
  WriteFile(tree + "/sub/b.gguf", 8192);
  WriteFile(tree + "/sub/deeper/c.txt", 10);
  std::uint64_t expected = Allocated(tree + "/a.gguf") + Allocated(tree + "/sub/b.gguf") +
                           Allocated(tree + "/sub/deeper/c.txt");
  // A hard link elsewhere keeps c.txt's blocks in use: removing it frees nothing.
  fs::create_hard_link(tree + "/sub/deeper/c.txt", box.base + "/data/c-link.txt");
  expected -= Allocated(tree + "/sub/deeper/c.txt");

  Result<RemoveOutcome> removed = RemovePath(tree, box.options);
  REQUIRE(removed.ok());
  CHECK(removed->existed);
  CHECK(removed->files == 3);
  CHECK(removed->directories == 3);
  CHECK(removed->bytes_freed == expected);
  CHECK(removed->bytes_freed >= 100'000);
  CHECK_FALSE(fs::exists(tree));
  CHECK(fs::exists(box.base + "/data/c-link.txt"));
  CHECK(fs::exists(box.base + "/shared"));
}

TEST_CASE("remove: a single file") {
  Sandbox box;
  WriteFile(box.base + "/models/old.safetensors", 5000);
  std::uint64_t allocated = Allocated(box.base + "/models/old.safetensors");
  Result<RemoveOutcome> removed = RemovePath(box.base + "/models/old.safetensors", box.options);
  REQUIRE(removed.ok());
  CHECK(removed->files == 1);
  CHECK(removed->directories == 0);
  CHECK(removed->bytes_freed == allocated);
  CHECK(DescribeRemoval("/models/old.safetensors", *removed) ==
        "removed /models/old.safetensors: 1 file, " + FormatSize(allocated) + " freed");
  RemoveOutcome tree{true, 431'800'000'000, 12, 3};
  CHECK(DescribeRemoval("/shared/glm5", tree) ==
        "removed /shared/glm5: 12 files, 3 directories, 402.1GiB freed");
}

TEST_CASE("remove: a missing path is success with nothing freed") {
  Sandbox box;
  for (std::string path : {box.base + "/shared/absent", box.base + "/shared/no/such/dir"}) {
    Result<RemoveOutcome> removed = RemovePath(path, box.options);
    REQUIRE(removed.ok());
    CHECK_FALSE(removed->existed);
    CHECK(removed->bytes_freed == 0);
    CHECK(removed->files == 0);
    CHECK(DescribeRemoval(path, *removed) == path + ": already absent");
  }
  // Below a regular file nothing can exist either.
  WriteFile(box.base + "/shared/file", 1);
  Result<RemoveOutcome> removed = RemovePath(box.base + "/shared/file/x", box.options);
  REQUIRE(removed.ok());
  CHECK_FALSE(removed->existed);
}

TEST_CASE("remove: a symlink inside the tree is unlinked, never followed") {
  Sandbox box;
  std::string tree = box.base + "/shared/m";
  WriteFile(tree + "/weights.bin", 4096);
  WriteFile(box.base + "/data/precious/keep.bin", 4096);
  WriteFile(box.base + "/data/keep-file.bin", 10);
  fs::create_directory_symlink(box.base + "/data/precious", tree + "/link");
  fs::create_symlink(box.base + "/data/keep-file.bin", tree + "/file-link");
  fs::create_symlink("/nonexistent", tree + "/dangling");

  Result<RemoveOutcome> removed = RemovePath(tree, box.options);
  REQUIRE(removed.ok());
  CHECK(removed->files == 4);  // weights.bin and the three links
  CHECK_FALSE(fs::exists(tree));
  CHECK(fs::exists(box.base + "/data/precious/keep.bin"));
  CHECK(fs::exists(box.base + "/data/keep-file.bin"));
}

TEST_CASE("remove: a named symlink out of the allowed roots is refused") {
  Sandbox box;
  WriteFile(box.base + "/data/weights/keep.bin", 10);
  fs::create_directory_symlink(box.base + "/data/weights", box.base + "/shared/link");
  CHECK(Refusal(box.base + "/shared/link", box.options) ==
        "refusing to remove " + box.base + "/shared/link: a symlink to " + box.base +
            "/data/weights, outside the allowed roots " + box.Roots());
  CHECK(fs::exists(box.base + "/data/weights/keep.bin"));
  CHECK(fs::is_symlink(box.base + "/shared/link"));
}

TEST_CASE("remove: a named symlink inside the roots is unlinked, its target kept") {
  Sandbox box;
  WriteFile(box.base + "/models/v2/keep.bin", 10);
  fs::create_directory_symlink(box.base + "/models/v2", box.base + "/models/current");
  Result<RemoveOutcome> removed = RemovePath(box.base + "/models/current", box.options);
  REQUIRE(removed.ok());
  CHECK(removed->files == 1);
  CHECK(removed->bytes_freed == 0);
  CHECK_FALSE(fs::is_symlink(box.base + "/models/current"));
  CHECK(fs::exists(box.base + "/models/v2/keep.bin"));
}

TEST_CASE("remove: a parent symlink out of the roots is refused") {
  Sandbox box;
  WriteFile(box.base + "/data/x/keep.bin", 10);
  fs::create_directory_symlink(box.base + "/data", box.base + "/shared/via");
  CHECK(Refusal(box.base + "/shared/via/x", box.options) ==
        "refusing to remove " + box.base + "/shared/via/x: it resolves to " + box.base +
            "/data/x, outside the allowed roots " + box.Roots());
  CHECK(fs::exists(box.base + "/data/x/keep.bin"));
  // Through a symlink to /: the real path is judged against the fixed refusals too.
  fs::create_directory_symlink("/", box.base + "/shared/slash");
  RemoveOptions anywhere;
  CHECK(Refusal(box.base + "/shared/slash/usr", anywhere) ==
        "refusing to remove " + box.base +
            "/shared/slash/usr: it resolves to /usr, a top-level system directory");
}

TEST_CASE("remove: an allowed root reached through a symlink still counts") {
  Sandbox box;
  fs::create_directory_symlink(box.base + "/shared", box.base + "/alias");
  WriteFile(box.base + "/shared/m/w.bin", 10);
  RemoveOptions options;
  options.allowed_roots = {box.base + "/alias"};
  Result<RemoveOutcome> removed = RemovePath(box.base + "/shared/m", options);
  REQUIRE(removed.ok());
  CHECK(removed->files == 1);
}

TEST_CASE("remove: a root containing the state directory cannot be emptied through it") {
  Sandbox box;
  fs::create_directories(box.base + "/shared/deployd-state");
  box.options.state_dir = box.base + "/shared/deployd-state";
  box.options.allowed_roots = {box.base};
  CHECK(Refusal(box.base + "/shared", box.options) ==
        "refusing to remove " + box.base + "/shared: contains deployd's state directory");
  CHECK(Refusal(box.base + "/shared/deployd-state/runs", box.options) ==
        "refusing to remove " + box.base +
            "/shared/deployd-state/runs: inside deployd's state directory");
  // Named through a symlink to it.
  fs::create_directory_symlink(box.base + "/shared", box.base + "/models/s");
  CHECK(Refusal(box.base + "/models/s/deployd-state", box.options) ==
        "refusing to remove " + box.base + "/models/s/deployd-state: it resolves to " + box.base +
            "/shared/deployd-state, deployd's state directory");
}
