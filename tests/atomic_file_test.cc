#include "util/atomic_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "action_test_helpers.h"

using namespace deployd;
using deployd::testing::TempDir;

namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

}  // namespace

TEST_CASE("WriteFileAtomically writes a new file and leaves nothing else behind", "[atomic_file]") {
  TempDir dir;
  REQUIRE(WriteFileAtomically(dir.File("unit.service"), "[Unit]\n", 0644).ok());
  CHECK(Read(dir.File("unit.service")) == "[Unit]\n");
  CHECK(Entries(dir.path()) == std::vector<std::string>{"unit.service"});

  REQUIRE(WriteFileAtomically(dir.File("empty"), "", 0640).ok());
  CHECK(Read(dir.File("empty")).empty());
}

TEST_CASE("WriteFileAtomically replaces a file whole", "[atomic_file]") {
  TempDir dir;
  dir.Write("status", std::string(10000, 'x'));
  REQUIRE(WriteFileAtomically(dir.File("status"), "{\"state\": \"running\"}", 0640).ok());
  CHECK(Read(dir.File("status")) == "{\"state\": \"running\"}");
  CHECK(Entries(dir.path()) == std::vector<std::string>{"status"});

  std::string big(3 << 20, 'y');
  REQUIRE(WriteFileAtomically(dir.File("status"), big, 0640).ok());
  CHECK(Read(dir.File("status")) == big);
}

TEST_CASE("WriteFileAtomically gives the file exactly the mode asked for", "[atomic_file]") {
  TempDir dir;
  // Not the umask's business: a unit file must be world-readable whatever it is.
  mode_t old_umask = ::umask(077);
  Status unit = WriteFileAtomically(dir.File("a.service"), "x", 0644);
  Status record = WriteFileAtomically(dir.File("a.status"), "x", 0640);
  ::umask(old_umask);
  REQUIRE(unit.ok());
  REQUIRE(record.ok());
  CHECK(ModeOf(dir.File("a.service")) == 0644);
  CHECK(ModeOf(dir.File("a.status")) == 0640);

  // A replaced file takes the new mode, not the old file's.
  REQUIRE(::chmod(dir.File("a.service").c_str(), 0600) == 0);
  REQUIRE(WriteFileAtomically(dir.File("a.service"), "y", 0644).ok());
  CHECK(ModeOf(dir.File("a.service")) == 0644);
}

TEST_CASE("WriteFileAtomically fails cleanly on a missing directory", "[atomic_file]") {
  TempDir dir;
  std::string path = dir.File("missing/kimi.service");
  Status status = WriteFileAtomically(path, "[Unit]\n", 0644);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message() == "cannot write " + path + ": No such file or directory");
  CHECK(Entries(dir.path()).empty());
}

TEST_CASE("WriteFileAtomically leaves the old file when the rename fails", "[atomic_file]") {
  TempDir dir;
  // A directory in the file's place: the temporary file is written, the rename refused.
  std::filesystem::create_directory(dir.File("taken"));
  dir.Write("taken/inside", "kept");
  Status status = WriteFileAtomically(dir.File("taken"), "new", 0644);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message().rfind("cannot write " + dir.File("taken") + ": rename: ", 0) == 0);
  CHECK(Entries(dir.path()) == std::vector<std::string>{"taken"});
  CHECK(Read(dir.File("taken/inside")) == "kept");
}

TEST_CASE("WriteFileAtomically without fsync replaces a file whole, also over a stale temporary",
          "[atomic_file]") {
  TempDir dir;
  dir.Write("a.status", "old record");
  dir.Write(".a.status.deployd-tmp", std::string(5000, 'z'));  // left by a killed writer
  REQUIRE(WriteFileAtomically(dir.File("a.status"), "new", 0640, Durability::kProcessCrash).ok());
  CHECK(Read(dir.File("a.status")) == "new");
  CHECK(ModeOf(dir.File("a.status")) == 0640);
  CHECK(Entries(dir.path()) == std::vector<std::string>{"a.status"});

  // A directory in the file's place is refused as with fsync, and left as it was.
  std::filesystem::create_directory(dir.File("taken"));
  Status status = WriteFileAtomically(dir.File("taken"), "x", 0640, Durability::kProcessCrash);
  REQUIRE_FALSE(status.ok());
  CHECK(status.message().rfind("cannot write " + dir.File("taken") + ": rename: ", 0) == 0);
  CHECK(Entries(dir.path()) == std::vector<std::string>{"a.status", "taken"});
}
