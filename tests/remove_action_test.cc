#include "actions/remove_action.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "util/units.h"

using namespace deployd;
namespace fs = std::filesystem;

namespace {

// /tmp/deployd-remove-action-XXXXXX with an allowed root (models) and a directory outside it
// (data); the context collects what the action says.
struct Sandbox {
  Sandbox() {
    char pattern[] = "/tmp/deployd-remove-action-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    base = pattern;
    fs::create_directories(base + "/models");
    fs::create_directories(base + "/data");
    fs::create_directories(base + "/state");
    ctx.allowed_roots = {base + "/models"};
    ctx.state_dir = base + "/state";
    ctx.say = [this](std::string_view line) { said.emplace_back(line); };
  }
  ~Sandbox() {
    std::error_code ec;
    fs::remove_all(base, ec);
  }

  std::string base;
  ActionContext ctx;
  std::vector<std::string> said;
};

std::uint64_t WriteFile(const std::string& path, std::size_t size) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << std::string(size, 'w');
  struct stat st {};
  REQUIRE(::lstat(path.c_str(), &st) == 0);
  return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

RemoveAction Remove(const std::string& path) { return RemoveAction{path}; }

}  // namespace

TEST_CASE("remove: a tree is deleted and the bytes freed are said", "[remove_action]") {
  Sandbox box;
  std::string model = box.base + "/models/glm5";
  std::uint64_t allocated = WriteFile(model + "/model-00001-of-00002.safetensors", 300000) +
                            WriteFile(model + "/sub/config.json", 100);

  Status status = RunRemoveAction(Remove(model), box.ctx);
  REQUIRE(status.ok());
  CHECK_FALSE(fs::exists(model));
  CHECK(box.said == std::vector<std::string>{"removed " + model + ": 2 files, 2 directories, " +
                                             FormatSize(allocated) + " freed"});
}

TEST_CASE("remove: an absent path is success with nothing to remove", "[remove_action]") {
  Sandbox box;
  std::string model = box.base + "/models/never-downloaded";
  Status status = RunRemoveAction(Remove(model), box.ctx);
  REQUIRE(status.ok());
  CHECK(box.said == std::vector<std::string>{model + ": already absent, nothing to remove"});
}

TEST_CASE("remove: refusals come from the daemon's allowed roots and state directory",
          "[remove_action]") {
  Sandbox box;
  SECTION("outside the allowed roots") {
    std::string data = box.base + "/data/keep";
    WriteFile(data + "/x", 10);
    Status status = RunRemoveAction(Remove(data), box.ctx);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() ==
          "refusing to remove " + data + ": outside the allowed roots (" + box.base + "/models)");
    CHECK(fs::exists(data + "/x"));
  }
  SECTION("the state directory, with no roots configured") {
    box.ctx.allowed_roots.clear();
    Status status = RunRemoveAction(Remove(box.base + "/state"), box.ctx);
    REQUIRE_FALSE(status.ok());
    CHECK(status.message() ==
          "refusing to remove " + box.base + "/state: deployd's state directory");
    CHECK(fs::exists(box.base + "/state"));
  }
  CHECK(box.said.empty());
}
