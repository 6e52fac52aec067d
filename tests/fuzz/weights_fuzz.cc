// Safetensors headers and index files as `weights_complete` reads them (checks/weights_check.h),
// from files, the way the check meets them: the input up to its first NUL byte is written as
// model.safetensors.index.json, the rest as model-00001-of-00002.safetensors, in a directory
// of this process's own, and the directory is checked. No input: both files absent.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "checks/weights_check.h"

using namespace deployd;

namespace {

// Never destroyed, so that the exit handler that removes it can still read its name.
const std::string& Directory() {
  static const std::string* dir = [] {
    std::string pattern = std::filesystem::temp_directory_path() / "deployd_weights_fuzz.XXXXXX";
    if (!::mkdtemp(pattern.data())) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(Directory(), ec);
    });
    return new std::string(pattern);
  }();
  return *dir;
}

void Write(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string& dir = Directory();
  const std::string index = dir + "/model.safetensors.index.json";
  const std::string shard = dir + "/model-00001-of-00002.safetensors";
  size_t nul = text.find('\0');
  if (nul == std::string_view::npos) {
    Write(index, text);
    std::filesystem::remove(shard);
  } else {
    Write(index, text.substr(0, nul));
    Write(shard, text.substr(nul + 1));
  }
  (void)CheckWeightsComplete(dir);
  return 0;
}
