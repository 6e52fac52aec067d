#include "checks/sha256.h"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <string>
#include <vector>

using namespace deployd;

TEST_CASE("sha256: the FIPS 180-4 test vectors") {
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(Sha256Hex(std::string(1'000'000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: the digest does not depend on how the input is split") {
  // Lengths around the 56- and 64-byte boundaries exercise every padding branch.
  for (std::size_t length : {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 1000}) {
    std::string message(length, 'x');
    for (std::size_t i = 0; i < length; ++i) message[i] = static_cast<char>('a' + i % 26);
    std::string whole = Sha256Hex(message);
    for (std::size_t step : {1, 3, 63, 64, 65}) {
      Sha256 hash;
      for (std::size_t i = 0; i < length; i += step)
        hash.Update(std::string_view(message).substr(i, step));
      CHECK(DigestHex(hash.Finish()) == whole);
    }
  }
  // 1,000,000 × 'a' fed in uneven pieces.
  Sha256 hash;
  std::string piece(997, 'a');
  std::size_t left = 1'000'000;
  while (left > 0) {
    std::size_t n = std::min(left, piece.size());
    hash.Update(piece.data(), n);
    left -= n;
  }
  CHECK(DigestHex(hash.Finish()) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: a file is hashed in blocks") {
  char path[] = "/tmp/deployd-sha256-XXXXXX";
  int fd = ::mkstemp(path);
  REQUIRE(fd >= 0);
  ::close(fd);
  // Larger than one 1MiB read block.
  std::string content(3 << 20, 'q');
  std::ofstream(path, std::ios::binary) << content;
  auto digest = Sha256File(path);
  REQUIRE(digest.ok());
  CHECK(*digest == Sha256Hex(content));
  ::unlink(path);
  auto missing = Sha256File(path);
  REQUIRE(!missing.ok());
  CHECK(missing.status().message() ==
        std::string("cannot read ") + path + ": No such file or directory");
}

TEST_CASE("sha256: files hashed several at once keep their order and their own errors") {
  char dir[] = "/tmp/deployd-sha256-XXXXXX";
  REQUIRE(::mkdtemp(dir) != nullptr);
  std::vector<std::string> paths;
  std::vector<std::string> contents;
  for (int i = 0; i < 8; ++i) {
    paths.push_back(std::string(dir) + "/f" + std::to_string(i));
    // Sizes from empty to past one 1MiB read block, so that workers finish out of order.
    contents.push_back(std::string((std::size_t{1} << (3 * i)) - 1, static_cast<char>('a' + i)));
    if (i != 4) std::ofstream(paths.back(), std::ios::binary) << contents.back();
  }
  for (unsigned parallel : {0u, 1u, 3u, 16u}) {
    std::vector<Result<std::string>> digests = Sha256Files(paths, parallel);
    REQUIRE(digests.size() == paths.size());
    for (std::size_t i = 0; i < paths.size(); ++i) {
      if (i == 4) {
        REQUIRE_FALSE(digests[i].ok());
        CHECK(digests[i].status().message() ==
              "cannot read " + paths[i] + ": No such file or directory");
      } else {
        REQUIRE(digests[i].ok());
        CHECK(*digests[i] == Sha256Hex(contents[i]));
      }
    }
  }
  CHECK(Sha256Files({}, 4).empty());
  for (std::size_t i = 0; i < paths.size(); ++i) ::unlink(paths[i].c_str());
  ::rmdir(dir);
}
