// What many unit tests need: a temporary directory removed with everything in it when the
// test ends, and reading a whole file.
#ifndef DEPLOYD_TESTS_TEST_SUPPORT_H_
#define DEPLOYD_TESTS_TEST_SUPPORT_H_

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace deployd::testing {

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/deployd_test.XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(File(name)) << text;
  }

 private:
  std::string path_;
};

// The whole file; "" when it cannot be read.
inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace deployd::testing

#endif  // DEPLOYD_TESTS_TEST_SUPPORT_H_
