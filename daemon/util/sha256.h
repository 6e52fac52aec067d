// Sha256: the SHA-256 digest (FIPS 180-4), streaming, for verifying downloaded weights against
// the hashes Hugging Face publishes (`lfs.sha256`). Written here so that deployd does not
// depend on OpenSSL for one function.
//
// A Sha256 object is not thread-safe; it hashes one message. Hashing a file reads it in 1MiB
// blocks, so a 5GB shard costs memory for one block only.
#ifndef DEPLOYD_UTIL_SHA256_H_
#define DEPLOYD_UTIL_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "deployd/status.h"

namespace deployd {

class Sha256 {
 public:
  using Digest = std::array<std::uint8_t, 32>;

  Sha256();
  // REQUIRES: Finish() has not been called.
  void Update(const void* data, std::size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // The digest of everything passed to Update(). REQUIRES: called once.
  Digest Finish();

 private:
  void Compress(const std::uint8_t* block);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> buffer_{};
  std::size_t buffered_ = 0;
  std::uint64_t total_bytes_ = 0;
};

// 64 lowercase hexadecimal digits.
std::string DigestHex(const Sha256::Digest& digest);
std::string Sha256Hex(std::string_view data);
// The hex digest of the file's content; an error says "cannot read PATH: <strerror>".
Result<std::string> Sha256File(const std::string& path);

}  // namespace deployd

#endif  // DEPLOYD_UTIL_SHA256_H_
