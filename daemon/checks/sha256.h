// Sha256: the SHA-256 digest, streaming, for verifying downloaded weights against the hashes
// Hugging Face publishes (`lfs.sha256`). OpenSSL's libcrypto computes it (the EVP interface),
// with the CPU's SHA extensions where it has them: 0.56-0.72 GB/s of a file on one loaded core
// (tests/bench/README.md), where the portable code it replaced reached about 0.1 GB/s.
//
// A Sha256 object is not thread-safe; it hashes one message. Distinct objects may be used on
// distinct threads at once (Sha256Files does). Hashing a file reads it in 1MiB blocks, so a 5GB
// shard costs memory for one block only.
#ifndef DEPLOYD_CHECKS_SHA256_H_
#define DEPLOYD_CHECKS_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/status.h"

struct evp_md_ctx_st;  // OpenSSL's EVP_MD_CTX

namespace deployd {

class Sha256 {
 public:
  using Digest = std::array<std::uint8_t, 32>;

  // Throws std::runtime_error when libcrypto cannot hash (it failed to initialise: a broken
  // openssl.cnf, no memory); Sha256File turns that into an error.
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  // REQUIRES: Finish() has not been called.
  void Update(const void* data, std::size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // The digest of everything passed to Update(). REQUIRES: called once.
  Digest Finish();

 private:
  struct ContextFree {
    void operator()(evp_md_ctx_st* context) const;
  };
  std::unique_ptr<evp_md_ctx_st, ContextFree> context_;
};

// 64 lowercase hexadecimal digits.
std::string DigestHex(const Sha256::Digest& digest);
std::string Sha256Hex(std::string_view data);
// The hex digest of the file's content; an error says "cannot read PATH: <strerror>" (or
// "cannot hash PATH: OpenSSL: <why>").
Result<std::string> Sha256File(const std::string& path);

// Sha256File of each path, in the order given, hashing up to `parallel` files at once on
// threads started for the call (1 or 0: one after another on the calling thread, no thread
// started). A file is hashed by one thread: the parallelism is across files.
std::vector<Result<std::string>> Sha256Files(const std::vector<std::string>& paths,
                                             unsigned parallel);

}  // namespace deployd

#endif  // DEPLOYD_CHECKS_SHA256_H_
