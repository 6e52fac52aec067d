#include "checks/sha256.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace deployd {
namespace {

[[noreturn]] void ThrowOpenSslError(const char* call) {
  char text[256];
  unsigned long code = ERR_get_error();
  if (code == 0) {
    std::snprintf(text, sizeof text, "%s failed", call);
  } else {
    ERR_error_string_n(code, text, sizeof text);
  }
  ERR_clear_error();
  throw std::runtime_error(text);
}

}  // namespace

void Sha256::ContextFree::operator()(evp_md_ctx_st* context) const { EVP_MD_CTX_free(context); }

Sha256::Sha256() : context_(EVP_MD_CTX_new()) {
  if (!context_) ThrowOpenSslError("EVP_MD_CTX_new");
  if (EVP_DigestInit_ex(context_.get(), EVP_sha256(), nullptr) != 1)
    ThrowOpenSslError("EVP_DigestInit_ex");
}

Sha256::~Sha256() = default;

void Sha256::Update(const void* data, std::size_t size) {
  if (size > 0 && EVP_DigestUpdate(context_.get(), data, size) != 1)
    ThrowOpenSslError("EVP_DigestUpdate");
}

Sha256::Digest Sha256::Finish() {
  Digest digest;
  unsigned int length = 0;
  if (EVP_DigestFinal_ex(context_.get(), digest.data(), &length) != 1 || length != digest.size())
    ThrowOpenSslError("EVP_DigestFinal_ex");
  return digest;
}

std::string DigestHex(const Sha256::Digest& digest) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(64);
  for (std::uint8_t byte : digest) {
    hex += kHex[byte >> 4];
    hex += kHex[byte & 0xf];
  }
  return hex;
}

std::string Sha256Hex(std::string_view data) {
  Sha256 hash;
  hash.Update(data);
  return DigestHex(hash.Finish());
}

Result<std::string> Sha256File(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::Error("cannot read " + path + ": " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  // Read once from start to end: the kernel may read ahead further (a cold shard streams at
  // the disk's speed, not at the speed of 1MiB requests one after another).
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  constexpr std::size_t kBlock = 1 << 20;
  auto block = std::make_unique<std::uint8_t[]>(kBlock);
  try {
    Sha256 hash;
    for (;;) {
      ssize_t n = ::read(fd, block.get(), kBlock);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::Error("cannot read " + path + ": " + std::strerror(errno));
      if (n == 0) break;
      hash.Update(block.get(), static_cast<std::size_t>(n));
    }
    return DigestHex(hash.Finish());
  } catch (const std::runtime_error& e) {
    return Status::Error("cannot hash " + path + ": OpenSSL: " + e.what());
  }
}

std::vector<Result<std::string>> Sha256Files(const std::vector<std::string>& paths,
                                             unsigned parallel) {
  std::vector<Result<std::string>> results(paths.size(), Status::Error("not hashed"));
  std::atomic<std::size_t> next{0};
  // Each worker takes the next file not yet taken, so that a large shard does not hold up
  // the files queued behind it on one thread while others sit idle.
  auto work = [&]() {
    for (std::size_t i = next++; i < paths.size(); i = next++) results[i] = Sha256File(paths[i]);
  };
  std::size_t threads = std::min<std::size_t>(parallel, paths.size());
  if (threads <= 1) {
    work();
    return results;
  }
  std::vector<std::jthread> workers;
  workers.reserve(threads);
  for (std::size_t t = 0; t < threads; ++t) workers.emplace_back(work);
  workers.clear();  // joins
  return results;
}

}  // namespace deployd
