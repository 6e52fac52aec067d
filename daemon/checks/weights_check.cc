#include "checks/weights_check.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json/array.hpp>
#include <boost/json/parse.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <string_view>
#include <tuple>
#include <vector>

#include "checks/sha256.h"
#include "util/units.h"

namespace deployd {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

constexpr std::string_view kIncompleteSuffix = ".incomplete";
constexpr std::string_view kShardSuffix = ".safetensors";
constexpr std::string_view kIndexSuffix = ".safetensors.index.json";
// Evidence lists at most this many leftover names; the count is always exact.
constexpr std::size_t kMaxListed = 20;
// An index is a few hundred KiB even for the largest models.
constexpr std::uintmax_t kMaxIndexSize = 64ull << 20;

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string Plural(std::size_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// A relative path that stays inside the directory: no root, no '..', not empty.
bool IsContainedRelative(const std::string& path) {
  fs::path p(path);
  if (path.empty() || p.is_absolute()) return false;
  for (const fs::path& part : p)
    if (part == "..") return false;
  return true;
}

struct Tree {
  std::vector<std::string> incomplete;  // relative paths, sorted
  std::vector<std::string> shards;
  std::vector<std::string> indexes;
};

// Lists the directory recursively without following directory symlinks (a link cycle must not
// hang a check). Names are relative to `dir`, '/'-separated.
Status ListTree(const fs::path& dir, Tree& tree) {
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, ec), end;
  if (ec) return Status::Error("cannot read " + dir.string() + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) break;
    const fs::path& path = it->path();
    std::string name = path.filename().string();
    std::string relative = path.lexically_relative(dir).generic_string();
    bool bookkeeping = relative.starts_with(".cache/");
    if (EndsWith(name, kIncompleteSuffix)) {
      tree.incomplete.push_back(relative);
    } else if (bookkeeping) {
      continue;
    } else if (EndsWith(name, kIndexSuffix)) {
      tree.indexes.push_back(relative);
    } else if (EndsWith(name, kShardSuffix)) {
      // A symlink counts (the hub's cache layout links snapshots to blobs); a directory
      // named *.safetensors does not.
      std::error_code type_ec;
      if (!it->is_directory(type_ec)) tree.shards.push_back(relative);
    }
  }
  if (ec) return Status::Error("cannot read under " + dir.string() + ": " + ec.message());
  std::sort(tree.incomplete.begin(), tree.incomplete.end());
  std::sort(tree.shards.begin(), tree.shards.end());
  std::sort(tree.indexes.begin(), tree.indexes.end());
  return Status::Ok();
}

struct IndexReport {
  std::string file;
  std::size_t shards = 0;            // distinct shards named
  std::vector<std::string> missing;  // relative to the checked directory
  std::string problem;               // set when the index itself is unusable
};

IndexReport CheckIndex(const fs::path& dir, const std::string& relative,
                       const std::set<std::string>& present) {
  IndexReport report;
  report.file = relative;
  fs::path path = dir / relative;
  std::error_code ec;
  std::uintmax_t size = fs::file_size(path, ec);
  if (ec) {
    report.problem = relative + " cannot be read: " + ec.message();
    return report;
  }
  if (size > kMaxIndexSize) {
    report.problem = relative + " is corrupt: " + FormatSize(size) + " is too large for an index";
    return report;
  }
  std::string text(size, '\0');
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr || std::fread(text.data(), 1, size, file) != size) {
    report.problem = relative + " cannot be read: " + std::strerror(errno);
    if (file != nullptr) std::fclose(file);
    return report;
  }
  std::fclose(file);
  boost::system::error_code json_ec;
  json::value index = json::parse(text, json_ec);
  if (json_ec) {
    report.problem = relative + " is corrupt: not valid JSON (" + json_ec.message() + ")";
    return report;
  }
  const json::value* weight_map =
      index.is_object() ? index.as_object().if_contains("weight_map") : nullptr;
  if (weight_map == nullptr || !weight_map->is_object()) {
    report.problem = relative + " is corrupt: it has no weight_map object";
    return report;
  }
  // Shard names are relative to the index's own directory.
  fs::path base = fs::path(relative).parent_path();
  std::set<std::string> named;
  for (const auto& [tensor, shard] : weight_map->as_object()) {
    if (!shard.is_string() || !IsContainedRelative(std::string(shard.as_string()))) {
      report.problem = relative + " is corrupt: tensor '" + std::string(tensor) +
                       "' names no shard inside the directory";
      return report;
    }
    named.insert((base / std::string(shard.as_string())).lexically_normal().generic_string());
  }
  report.shards = named.size();
  for (const std::string& shard : named)
    if (!present.contains(shard)) report.missing.push_back(shard);
  return report;
}

// A shard named as a series: "model-00002-of-00003.safetensors" is number 2 of 3.
struct NumberedName {
  std::string stem;      // "model-" (with its separator), or "" when the name starts numbered
  std::string of_text;   // "00003", as written
  std::size_t width;     // of the number: "00002" is 5
  std::uint64_t number;  // 2
  std::uint64_t of;      // 3
};

// More digits than this is not a shard count (and would make the series too long to check).
constexpr std::size_t kMaxSeriesDigits = 6;

std::optional<std::uint64_t> Digits(std::string_view s) {
  if (s.empty() || s.size() > kMaxSeriesDigits) return std::nullopt;
  std::uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    n = n * 10 + static_cast<std::uint64_t>(c - '0');
  }
  return n;
}

std::optional<NumberedName> ParseNumbered(std::string_view name) {
  if (!EndsWith(name, kShardSuffix)) return std::nullopt;
  name.remove_suffix(kShardSuffix.size());
  std::size_t of = name.rfind("-of-");
  if (of == std::string_view::npos) return std::nullopt;
  std::string_view head = name.substr(0, of);
  std::size_t dash = head.rfind('-');
  std::size_t start = dash == std::string_view::npos ? 0 : dash + 1;
  std::optional<std::uint64_t> number = Digits(head.substr(start));
  std::optional<std::uint64_t> count = Digits(name.substr(of + 4));
  if (!number || !count || *count == 0) return std::nullopt;
  return NumberedName{std::string(head.substr(0, start)), std::string(name.substr(of + 4)),
                      head.size() - start, *number, *count};
}

struct SeriesReport {
  std::string name;                  // "sub/model-*-of-00003", for the evidence and message
  std::uint64_t shards = 0;          // as the names count them
  std::size_t present = 0;           // numbers 1..shards found
  std::vector<std::string> missing;  // relative paths, at most kMaxListed
  std::uint64_t missing_count = 0;
};

// The numbered series of shards in the directories that hold no index (see the header).
std::vector<SeriesReport> CheckNumbered(const Tree& tree) {
  std::set<std::string> indexed_dirs;
  for (const std::string& index : tree.indexes)
    indexed_dirs.insert(fs::path(index).parent_path().generic_string());
  // Keyed by directory, stem, count as written and number width: one series each.
  std::map<std::tuple<std::string, std::string, std::string, std::size_t>, std::set<std::uint64_t>>
      series;
  for (const std::string& relative : tree.shards) {
    fs::path path(relative);
    std::string dir = path.parent_path().generic_string();
    if (indexed_dirs.contains(dir)) continue;
    std::optional<NumberedName> n = ParseNumbered(path.filename().string());
    if (!n) continue;
    std::set<std::uint64_t>& numbers = series[{dir, n->stem, n->of_text, n->width}];
    if (n->number >= 1 && n->number <= n->of) numbers.insert(n->number);
  }
  std::vector<SeriesReport> reports;
  for (const auto& [key, numbers] : series) {
    const auto& [dir, stem, of_text, width] = key;
    std::string prefix = dir.empty() ? stem : dir + "/" + stem;
    SeriesReport report;
    report.name = prefix + "*-of-" + of_text;
    report.shards = *Digits(of_text);
    report.present = numbers.size();
    report.missing_count = report.shards - numbers.size();
    for (std::uint64_t k = 1; k <= report.shards && report.missing.size() < kMaxListed; ++k) {
      if (numbers.contains(k)) continue;
      std::string digits = std::to_string(k);
      if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
      report.missing.push_back(prefix + digits + "-of-" + of_text + std::string(kShardSuffix));
    }
    reports.push_back(std::move(report));
  }
  return reports;
}

// "a, b, c, …": the first three names.
std::string FirstNames(const std::vector<std::string>& names, std::uint64_t count) {
  std::string out;
  for (std::size_t i = 0; i < names.size() && i < 3; ++i) out += (i == 0 ? "" : ", ") + names[i];
  if (count > 3) out += ", …";
  return out;
}

struct ShardReport {
  std::string file;
  std::uint64_t size = 0;
  std::optional<std::uint64_t> expected_size;
  const char* status = "complete";  // complete, truncated, oversized, corrupt, unreadable
  std::string problem;              // follows "shard FILE ", empty when complete
};

std::uint64_t LittleEndian64(const unsigned char* bytes) {
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | bytes[i];
  return n;
}

// Reads exactly `size` bytes at `offset`; false on a short read (the file shrank) or error.
bool ReadAt(int fd, void* buffer, std::size_t size, off_t offset) {
  auto* out = static_cast<char*>(buffer);
  while (size > 0) {
    ssize_t n = ::pread(fd, out, size, offset);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    out += n;
    size -= static_cast<std::size_t>(n);
    offset += n;
  }
  return true;
}

std::optional<std::uint64_t> AsOffset(const json::value& v) {
  if (v.is_uint64()) return v.as_uint64();
  if (v.is_int64() && v.as_int64() >= 0) return static_cast<std::uint64_t>(v.as_int64());
  return std::nullopt;
}

ShardReport CheckShard(const fs::path& dir, const std::string& relative) {
  ShardReport report;
  report.file = relative;
  auto corrupt = [&](std::string why) {
    report.status = "corrupt";
    report.problem = "is corrupt: " + std::move(why);
    return report;
  };
  fs::path path = dir / relative;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    report.status = "unreadable";
    report.problem = std::string("cannot be read: ") + std::strerror(errno);
    return report;
  }
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    report.status = "unreadable";
    report.problem = "is not a regular file";
    return report;
  }
  report.size = static_cast<std::uint64_t>(st.st_size);
  unsigned char prefix[8];
  if (report.size < 8 || !ReadAt(fd, prefix, 8, 0))
    return corrupt(FormatSize(report.size) + " is too short for a safetensors header");
  std::uint64_t header_length = LittleEndian64(prefix);
  if (header_length > kMaxSafetensorsHeader)
    return corrupt("header length " + std::to_string(header_length) + " is over " +
                   FormatSize(kMaxSafetensorsHeader));
  if (header_length > report.size - 8)
    return corrupt("header length " + std::to_string(header_length) + " runs past the end of the " +
                   FormatSize(report.size) + " file");
  std::string header(header_length, '\0');
  if (!ReadAt(fd, header.data(), header.size(), 8))
    return corrupt("its header cannot be read: " + std::string(std::strerror(errno)));
  boost::system::error_code json_ec;
  json::value parsed = json::parse(header, json_ec);
  if (json_ec) return corrupt("header is not valid JSON (" + json_ec.message() + ")");
  if (!parsed.is_object()) return corrupt("header is not a JSON object");
  std::uint64_t data_end = 0;
  for (const auto& [name, tensor] : parsed.as_object()) {
    if (name == "__metadata__") continue;
    const json::value* offsets =
        tensor.is_object() ? tensor.as_object().if_contains("data_offsets") : nullptr;
    std::optional<std::uint64_t> begin, end;
    if (offsets != nullptr && offsets->is_array() && offsets->as_array().size() == 2) {
      begin = AsOffset(offsets->as_array()[0]);
      end = AsOffset(offsets->as_array()[1]);
    }
    if (!begin || !end || *begin > *end)
      return corrupt("tensor '" + std::string(name) + "' has no valid data_offsets");
    data_end = std::max(data_end, *end);
  }
  std::uint64_t expected = 0;
  if (__builtin_add_overflow(8 + header_length, data_end, &expected))
    return corrupt("data offsets past any possible file size");
  report.expected_size = expected;
  if (report.size < expected) {
    report.status = "truncated";
    report.problem =
        "is truncated (" + FormatSize(report.size) + " of " + FormatSize(expected) + ")";
  } else if (report.size > expected) {
    // safetensors refuses this too: the data must end exactly where the file does.
    report.status = "oversized";
    report.problem = "has " + std::to_string(report.size - expected) +
                     " bytes past the end of its data (" + FormatSize(report.size) +
                     ", header says " + FormatSize(expected) + ")";
  }
  return report;
}

std::string Lowercase(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

bool IsHexDigest(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

json::array Listed(const std::vector<std::string>& names) {
  json::array out;
  for (std::size_t i = 0; i < names.size() && i < kMaxListed; ++i) out.emplace_back(names[i]);
  return out;
}

// Step 4: each file against its digest, `parallel` files at once.
json::array CheckDigests(const std::string& dir, const std::map<std::string, std::string>& digests,
                         unsigned parallel, json::array& problems) {
  std::vector<std::string> paths;
  for (const auto& [file, expected] : digests) paths.push_back((fs::path(dir) / file).string());
  std::vector<Result<std::string>> actual = Sha256Files(paths, parallel);
  json::array entries;
  std::size_t i = 0;
  for (const auto& [file, expected] : digests) {
    const Result<std::string>& hashed = actual[i];
    const std::string& path = paths[i++];
    json::object entry{{"file", file}, {"expected", expected}};
    if (!hashed.ok()) {
      entry["status"] = "unreadable";
      entry["error"] = hashed.status().message();
      std::error_code exists_ec;
      problems.emplace_back(fs::exists(path, exists_ec)
                                ? file + " cannot be hashed: " + hashed.status().message()
                                : file + " listed in sha256 is missing");
    } else {
      entry["actual"] = hashed.value();
      bool match = hashed.value() == expected;
      entry["status"] = match ? "match" : "mismatch";
      if (!match) {
        problems.emplace_back(file + " does not match its sha256 (expected " +
                              expected.substr(0, 12) + "…, got " + hashed->substr(0, 12) + "…)");
      }
    }
    entries.push_back(std::move(entry));
  }
  return entries;
}

}  // namespace

unsigned HashParallelism() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (::sched_getaffinity(0, sizeof cpus, &cpus) != 0) return 1;
  return std::clamp<unsigned>(static_cast<unsigned>(CPU_COUNT(&cpus)), 1, kMaxParallelHashes);
}

Result<WeightsCheckOutcome> CheckWeightsComplete(const std::string& dir,
                                                 const WeightsCheckOptions& options) {
  std::map<std::string, std::string> expected_digests;
  for (const auto& [file, digest] : options.sha256) {
    if (!IsContainedRelative(file))
      return Status::Error("weights_complete: sha256 path '" + file +
                           "' must be relative to the directory, without '..'");
    std::string lower = Lowercase(digest);
    if (!IsHexDigest(lower))
      return Status::Error("weights_complete: sha256 for '" + file +
                           "' is not 64 hexadecimal digits");
    expected_digests[fs::path(file).lexically_normal().generic_string()] = lower;
  }

  WeightsCheckOutcome outcome;
  json::object& evidence = outcome.evidence;
  evidence["check"] = "weights_complete";
  evidence["target"] = dir;
  json::array problems;
  auto finish = [&]() {
    outcome.passed = problems.empty();
    if (!problems.empty())
      outcome.summary = "weights " + dir + ": " + std::string(problems[0].as_string());
    evidence["problems"] = std::move(problems);
    return outcome;
  };

  std::error_code ec;
  fs::file_status status = fs::status(dir, ec);
  if (!fs::exists(status)) {
    problems.emplace_back(ec && ec != std::errc::no_such_file_or_directory
                              ? "cannot be read: " + ec.message()
                              : std::string("does not exist"));
    return finish();
  }
  if (!fs::is_directory(status)) {
    problems.emplace_back("is not a directory");
    return finish();
  }

  Tree tree;
  if (Status listed = ListTree(dir, tree); !listed.ok()) {
    problems.emplace_back(listed.message());
    return finish();
  }

  // 1. Downloads in progress.
  evidence["incomplete"] = Listed(tree.incomplete);
  evidence["incomplete_count"] = tree.incomplete.size();
  if (!tree.incomplete.empty()) {
    problems.emplace_back(Plural(tree.incomplete.size(), "file", "files") +
                          " still downloading (*.incomplete)");
  }

  // 2. Shards the indexes name.
  std::set<std::string> present(tree.shards.begin(), tree.shards.end());
  json::array indexes;
  for (const std::string& relative : tree.indexes) {
    IndexReport index = CheckIndex(dir, relative, present);
    json::object entry{{"file", index.file}, {"shards", index.shards}};
    entry["missing"] = Listed(index.missing);
    if (!index.problem.empty()) {
      entry["problem"] = index.problem;
      problems.emplace_back(index.problem);
    } else if (index.missing.size() == 1) {
      problems.emplace_back(index.missing[0] + " named in the index is missing");
    } else if (!index.missing.empty()) {
      problems.emplace_back(std::to_string(index.missing.size()) +
                            " shards named in the index are missing (" +
                            FirstNames(index.missing, index.missing.size()) + ")");
    }
    indexes.push_back(std::move(entry));
  }
  evidence["indexes"] = std::move(indexes);
  json::array numbered;
  for (const SeriesReport& series : CheckNumbered(tree)) {
    json::object entry{
        {"name", series.name}, {"shards", series.shards}, {"present", series.present}};
    entry["missing"] = Listed(series.missing);
    if (series.missing_count > 0) {
      problems.emplace_back(
          std::to_string(series.missing_count) + " of the " + std::to_string(series.shards) +
          " shards named " + series.name + (series.missing_count == 1 ? " is" : " are") +
          " missing (no index): " + FirstNames(series.missing, series.missing_count));
    }
    numbered.push_back(std::move(entry));
  }
  evidence["numbered"] = std::move(numbered);

  // 3. Each shard's length against its header.
  json::array shards;
  std::uint64_t total_bytes = 0;
  for (const std::string& relative : tree.shards) {
    ShardReport shard = CheckShard(dir, relative);
    json::object entry{{"file", shard.file}, {"size", shard.size}, {"status", shard.status}};
    entry["expected_size"] = shard.expected_size ? json::value(*shard.expected_size) : nullptr;
    if (!shard.problem.empty()) problems.emplace_back("shard " + shard.file + " " + shard.problem);
    total_bytes += shard.size;
    shards.push_back(std::move(entry));
  }
  evidence["shards"] = std::move(shards);
  evidence["total_bytes"] = total_bytes;
  if (tree.shards.empty() && problems.empty()) problems.emplace_back("no *.safetensors files");

  // 4. Digests, only when everything cheaper passed: hashing hundreds of GB to confirm a
  // failure already known would hold the check for minutes.
  if (!expected_digests.empty() && problems.empty())
    evidence["sha256"] = CheckDigests(dir, expected_digests, options.parallel_hashes, problems);

  if (problems.empty()) {
    outcome.summary = "weights " + dir + ": " + Plural(tree.shards.size(), "shard", "shards") +
                      " complete (" + FormatSize(total_bytes) + ")";
    if (!expected_digests.empty())
      outcome.summary += ", " + Plural(expected_digests.size(), "file", "files") + " match sha256";
  }
  return finish();
}

}  // namespace deployd
