#include "util/secrets.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

using namespace deployd;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  TempDir() {
    char pattern[] = "/tmp/deployd-secrets-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string path;
};

std::string WriteSecret(const TempDir& dir, const std::string& content, mode_t mode) {
  std::string path = dir.path + "/hf_token";
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
  REQUIRE(::chmod(path.c_str(), mode) == 0);
  return path;
}

std::string LoadError(const SecretSpec& spec) {
  Result<Secret> secret = LoadSecret(spec);
  REQUIRE_FALSE(secret.ok());
  return secret.status().message();
}

}  // namespace

TEST_CASE("secrets: a private file is read, its trailing newline stripped") {
  TempDir dir;
  std::string path = WriteSecret(dir, "hf_abcdef123\n", 0600);
  Result<Secret> secret = LoadSecret({"HF_TOKEN", path, ""});
  REQUIRE(secret.ok());
  CHECK(secret->name == "HF_TOKEN");
  CHECK(secret->value == "hf_abcdef123");
  WriteSecret(dir, "hf_abcdef123\r\n", 0640);  // group access is the operator's choice
  CHECK(LoadSecret({"HF_TOKEN", path, ""})->value == "hf_abcdef123");
  WriteSecret(dir, "line one\nline two", 0400);
  CHECK(LoadSecret({"HF_TOKEN", path, ""})->value == "line one\nline two");
}

TEST_CASE("secrets: a file others can access is refused, the value never shown") {
  TempDir dir;
  std::string path = WriteSecret(dir, "hf_abcdef123\n", 0644);
  CHECK(LoadError({"HF_TOKEN", path, ""}) ==
        "secret HF_TOKEN: " + path + " is readable by others (mode 0644); chmod 600 it");
  WriteSecret(dir, "hf_abcdef123\n", 0602);
  CHECK(LoadError({"HF_TOKEN", path, ""}) ==
        "secret HF_TOKEN: " + path + " is writable by others (mode 0602); chmod 600 it");
  WriteSecret(dir, "hf_abcdef123\n", 0601);
  CHECK(LoadError({"HF_TOKEN", path, ""}) ==
        "secret HF_TOKEN: " + path + " is executable by others (mode 0601); chmod 600 it");
}

TEST_CASE("secrets: a file owned by another user is refused") {
  if (::geteuid() != 0) {
    WARN("not root: cannot give a file to another user, case skipped");
    return;
  }
  TempDir dir;
  std::string path = WriteSecret(dir, "hf_abcdef123\n", 0600);
  REQUIRE(::chown(path.c_str(), 4242, 4242) == 0);
  CHECK(LoadError({"HF_TOKEN", path, ""}) ==
        "secret HF_TOKEN: " + path +
            " is owned by uid 4242 (deployd runs as uid 0); chown it to deployd's user or root");
}

TEST_CASE("secrets: missing, empty, odd and oversized files are refused") {
  TempDir dir;
  CHECK(LoadError({"HF_TOKEN", dir.path + "/absent", ""}) ==
        "secret HF_TOKEN: cannot read " + dir.path + "/absent: No such file or directory");
  CHECK(LoadError({"HF_TOKEN", dir.path, ""}) ==
        "secret HF_TOKEN: " + dir.path + " is not a regular file");
  std::string path = WriteSecret(dir, "\n", 0600);
  CHECK(LoadError({"HF_TOKEN", path, ""}) == "secret HF_TOKEN: " + path + " is empty");
  WriteSecret(dir, std::string(65 << 10, 'k'), 0600);
  CHECK(LoadError({"HF_TOKEN", path, ""}) ==
        "secret HF_TOKEN: " + path + " is larger than 64KiB; a secret file holds one value");
  WriteSecret(dir, std::string("ab\0cd", 5), 0600);
  CHECK(LoadError({"HF_TOKEN", path, ""}) == "secret HF_TOKEN: " + path + " contains a NUL byte");
  // A FIFO must not block the daemon.
  std::string fifo = dir.path + "/fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK(LoadError({"HF_TOKEN", fifo, ""}) == "secret HF_TOKEN: " + fifo + " is not a regular file");
  CHECK(LoadError({"HF_TOKEN", "hf_token", ""}) ==
        "secret HF_TOKEN: hf_token is not an absolute path");
}

TEST_CASE("secrets: from deployd's environment") {
  ::setenv("DEPLOYD_TEST_SECRET", "s3cr3t-value\n", 1);
  Result<Secret> secret = LoadSecret({"HF_TOKEN", "", "DEPLOYD_TEST_SECRET"});
  REQUIRE(secret.ok());
  CHECK(secret->value == "s3cr3t-value");
  ::setenv("DEPLOYD_TEST_SECRET", "", 1);
  CHECK(LoadError({"HF_TOKEN", "", "DEPLOYD_TEST_SECRET"}) ==
        "secret HF_TOKEN: environment variable DEPLOYD_TEST_SECRET is empty");
  ::unsetenv("DEPLOYD_TEST_SECRET");
  CHECK(LoadError({"HF_TOKEN", "", "DEPLOYD_TEST_SECRET"}) ==
        "secret HF_TOKEN: environment variable DEPLOYD_TEST_SECRET is not set in deployd's "
        "environment");
}

TEST_CASE("secrets: a spec names one source and a usable variable") {
  CHECK(LoadError({"HF_TOKEN", "/x", "Y"}) == "secret HF_TOKEN: give exactly one of file and env");
  CHECK(LoadError({"HF_TOKEN", "", ""}) == "secret HF_TOKEN: give exactly one of file and env");
  CHECK(LoadError({"HF-TOKEN", "/x", ""}) ==
        "secret 'HF-TOKEN': the name must be an environment variable name "
        "([A-Za-z_][A-Za-z0-9_]*)");
  CHECK(LoadError({"1TOKEN", "/x", ""}).starts_with("secret '1TOKEN': the name must be"));
}

TEST_CASE("redactor: every occurrence of every secret becomes ***") {
  Redactor redactor({"hf_abcdef123", "sk-live-999", "pa55word"});
  CHECK(redactor.Redact("token=hf_abcdef123 key=sk-live-999") == "token=*** key=***");
  CHECK(redactor.Redact("hf_abcdef123hf_abcdef123") == "***");  // adjacent: one span
  CHECK(redactor.Redact("pa55word, pa55word.") == "***, ***.");
  CHECK(redactor.Redact("pa55wor") == "pa55wor");
  CHECK(redactor.Redact("no secrets here") == "no secrets here");
  CHECK(redactor.Redact("") == "");
  CHECK(redactor.Redact("pa55word") == "***");
}

TEST_CASE("redactor: overlapping secrets and a secret inside another") {
  // "abcdef" overlaps "defghi"; "bcde" lies inside "abcdef"; the long one is found last and
  // starts before the short one already seen.
  Redactor redactor({"abcdef", "defghi", "bcde", "xyzw", "0123456789"});
  CHECK(redactor.Redact("..abcdefghi..") == "..***..");
  CHECK(redactor.Redact("..bcde..") == "..***..");
  CHECK(redactor.Redact("abcdefg") == "***g");
  CHECK(redactor.Redact("xyzwxyzw") == "***");
  CHECK(redactor.Redact("xyzxyzw") == "xyz***");  // the automaton recovers after a near miss
  CHECK(redactor.Redact("012345678 0123456789") == "012345678 ***");
  Redactor nested({"2345", "1234567890123"});
  CHECK(nested.Redact("a1234567890123b") == "a***b");
  CHECK(nested.Redact("a123456789012b") == "a1***6789012b");
}

TEST_CASE("redactor: short values are not redacted, multi-line values line by line") {
  Redactor short_only({"abc", "", "xy"});
  CHECK(short_only.empty());
  CHECK(short_only.Redact("abc xy") == "abc xy");
  Redactor key({"-----KEY-----\nMIIEvgIBADAN\r\nok\n"});
  CHECK_FALSE(key.empty());
  CHECK(key.Redact("MIIEvgIBADAN") == "***");
  CHECK(key.Redact("ok -----KEY-----") == "ok ***");
  Redactor none;
  CHECK(none.empty());
  CHECK(none.Redact("anything") == "anything");
}

TEST_CASE("redactor: many lines against many secrets agree with a naive scan") {
  std::vector<std::string> secrets;
  for (int i = 0; i < 50; ++i) secrets.push_back("tok" + std::to_string(i * 7919) + "z");
  Redactor redactor(secrets);
  for (int i = 0; i < 2000; ++i) {
    std::string line = "step " + std::to_string(i) + " tok" + std::to_string((i % 60) * 7919) +
                       "z and tok" + std::to_string(i) + "z";
    // Naive: mark covered bytes for every occurrence of every secret.
    std::vector<bool> covered(line.size(), false);
    for (const std::string& s : secrets) {
      for (std::size_t at = line.find(s); at != std::string::npos; at = line.find(s, at + 1))
        for (std::size_t k = 0; k < s.size(); ++k) covered[at + k] = true;
    }
    std::string expected;
    for (std::size_t k = 0; k < line.size(); ++k) {
      if (!covered[k]) {
        expected += line[k];
      } else if (k == 0 || !covered[k - 1]) {
        expected += "***";
      }
    }
    REQUIRE(redactor.Redact(line) == expected);
  }
}
