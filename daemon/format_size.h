// FormatSize: byte counts for messages, in binary units ("12.3GiB", "600GiB", "512B") — the
// inverse direction of ParseSize, whose output it parses back (to one decimal).
#ifndef DEPLOYD_FORMAT_SIZE_H_
#define DEPLOYD_FORMAT_SIZE_H_

#include <cstdint>
#include <string>

namespace deployd {

// One decimal unless the value is whole in its unit: 1536 → "1.5KiB", 1024 → "1KiB".
std::string FormatSize(std::uint64_t bytes);

}  // namespace deployd

#endif  // DEPLOYD_FORMAT_SIZE_H_
