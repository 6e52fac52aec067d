#include "util/secrets.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <utility>

namespace deployd {
namespace {

// A token is tens of bytes and a key a few KiB; anything larger is the wrong file.
constexpr std::size_t kMaxSecretFile = 64 << 10;

bool IsEnvironmentName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9')) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

void StripTrailingNewlines(std::string& value) {
  while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
}

Result<std::string> ReadSecretFile(const std::string& path) {
  // O_NONBLOCK: a FIFO put where the file should be must not hang the daemon in open().
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
  if (fd < 0) return Status::Error("cannot read " + path + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // Judged on the opened file, so that what is checked is what is read.
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return Status::Error("cannot read " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) return Status::Error(path + " is not a regular file");
  uid_t self = ::geteuid();
  if (st.st_uid != self && st.st_uid != 0) {
    return Status::Error(path + " is owned by uid " + std::to_string(st.st_uid) +
                         " (deployd runs as uid " + std::to_string(self) +
                         "); chown it to deployd's user or root");
  }
  if ((st.st_mode & 007) != 0) {
    const char* what = (st.st_mode & 004)   ? "readable"
                       : (st.st_mode & 002) ? "writable"
                                            : "executable";
    return Status::Error(path + " is " + what + " by others (mode " + ModeText(st.st_mode) +
                         "); chmod 600 it");
  }
  if (static_cast<std::uint64_t>(st.st_size) > kMaxSecretFile)
    return Status::Error(path + " is larger than 64KiB; a secret file holds one value");
  std::string value;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Error("cannot read " + path + ": " + std::strerror(errno));
    if (n == 0) break;
    value.append(buffer, static_cast<std::size_t>(n));
    if (value.size() > kMaxSecretFile)
      return Status::Error(path + " is larger than 64KiB; a secret file holds one value");
  }
  return value;
}

}  // namespace

Result<Secret> LoadSecret(const SecretSpec& spec) {
  if (!IsEnvironmentName(spec.name)) {
    return Status::Error("secret '" + spec.name +
                         "': the name must be an environment variable name "
                         "([A-Za-z_][A-Za-z0-9_]*)");
  }
  std::string prefix = "secret " + spec.name + ": ";
  if (spec.file.empty() == spec.env.empty())
    return Status::Error(prefix + "give exactly one of file and env");
  Secret secret{spec.name, ""};
  std::string source;
  if (!spec.env.empty()) {
    source = "environment variable " + spec.env;
    const char* value = std::getenv(spec.env.c_str());
    if (value == nullptr)
      return Status::Error(prefix + source + " is not set in deployd's environment");
    secret.value = value;
  } else {
    source = spec.file;
    if (spec.file[0] != '/') return Status::Error(prefix + spec.file + " is not an absolute path");
    Result<std::string> value = ReadSecretFile(spec.file);
    if (!value.ok()) return Status::Error(prefix + value.status().message());
    secret.value = std::move(*value);
    // An environment variable cannot carry a NUL: the child would get a cut value.
    if (secret.value.find('\0') != std::string::npos)
      return Status::Error(prefix + source + " contains a NUL byte");
  }
  StripTrailingNewlines(secret.value);
  if (secret.value.empty()) return Status::Error(prefix + source + " is empty");
  return secret;
}

Redactor::Redactor(const std::vector<std::string>& secrets) {
  // Trie of every line of every secret long enough to redact.
  constexpr std::int32_t kNone = -1;
  std::array<std::int32_t, 256> empty_row;
  empty_row.fill(kNone);
  transitions_.push_back(empty_row);
  longest_match_.push_back(0);
  for (const std::string& secret : secrets) {
    std::size_t begin = 0;
    while (begin <= secret.size()) {
      std::size_t end = std::min(secret.find('\n', begin), secret.size());
      std::string_view line(secret.data() + begin, end - begin);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      begin = end + 1;
      if (line.size() < kMinLength) continue;
      std::int32_t state = 0;
      for (char c : line) {
        auto byte = static_cast<unsigned char>(c);
        if (transitions_[state][byte] == kNone) {
          transitions_[state][byte] = static_cast<std::int32_t>(transitions_.size());
          transitions_.push_back(empty_row);
          longest_match_.push_back(0);
        }
        state = transitions_[state][byte];
      }
      longest_match_[state] = std::max<std::uint32_t>(longest_match_[state], line.size());
    }
  }
  // Breadth-first, so a state's failure state (shallower) is complete before it is used: the
  // missing transitions become those of the failure state, which turns the trie into a DFA.
  std::vector<std::int32_t> failure(transitions_.size(), 0);
  std::deque<std::int32_t> queue;
  for (auto& next : transitions_[0]) {
    if (next == kNone) {
      next = 0;
    } else {
      queue.push_back(next);
    }
  }
  while (!queue.empty()) {
    std::int32_t state = queue.front();
    queue.pop_front();
    longest_match_[state] = std::max(longest_match_[state], longest_match_[failure[state]]);
    for (int byte = 0; byte < 256; ++byte) {
      std::int32_t& next = transitions_[state][byte];
      std::int32_t fallback = transitions_[failure[state]][byte];
      if (next == kNone) {
        next = fallback;
      } else {
        failure[next] = fallback;
        queue.push_back(next);
      }
    }
  }
}

std::string Redactor::Redact(std::string_view line) const {
  if (empty()) return std::string(line);
  // The longest secret ending at each position covers every shorter one ending there; the
  // covered spans are merged once the line is scanned, since a long secret found late can
  // start before spans already seen.
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  std::int32_t state = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    state = transitions_[state][static_cast<unsigned char>(line[i])];
    if (std::uint32_t length = longest_match_[state]; length != 0)
      spans.emplace_back(i + 1 - length, i + 1);
  }
  if (spans.empty()) return std::string(line);
  std::sort(spans.begin(), spans.end());
  std::string out;
  out.reserve(line.size());
  std::size_t copied = 0;
  for (std::size_t i = 0; i < spans.size();) {
    auto [start, end] = spans[i];
    // Overlapping or touching spans become one.
    for (++i; i < spans.size() && spans[i].first <= end; ++i) end = std::max(end, spans[i].second);
    out.append(line.substr(copied, start - copied));
    out += "***";
    copied = end;
  }
  out.append(line.substr(copied));
  return out;
}

}  // namespace deployd
