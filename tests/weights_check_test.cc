#include "checks/weights_check.h"

#include <stdlib.h>

#include <boost/json/serialize.hpp>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "checks/sha256.h"
#include "util/units.h"

using namespace deployd;
namespace fs = std::filesystem;

namespace {

// A directory under /tmp, removed with everything in it when the test ends.
struct TempDir {
  TempDir() {
    char pattern[] = "/tmp/deployd-weights-XXXXXX";
    REQUIRE(::mkdtemp(pattern) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
  std::string path;
};

struct Tensor {
  std::string name;
  std::size_t bytes;
};

// The bytes of a safetensors file as the format defines it: u64 little-endian header length,
// a JSON header padded with spaces to a multiple of 8 (as the reference writer does), then the
// tensors' data back to back.
std::string SafetensorsBytes(const std::vector<Tensor>& tensors) {
  std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
  std::size_t offset = 0;
  std::string data;
  for (const Tensor& t : tensors) {
    header += ",\"" + t.name + "\":{\"dtype\":\"U8\",\"shape\":[" + std::to_string(t.bytes) +
              "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + t.bytes) + "]}";
    for (std::size_t i = 0; i < t.bytes; ++i) data += static_cast<char>('a' + (offset + i) % 26);
    offset += t.bytes;
  }
  header += "}";
  while (header.size() % 8 != 0) header += ' ';
  std::string out;
  for (int i = 0; i < 8; ++i) out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

void WriteFile(const std::string& path, const std::string& content) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << content;
}

// Two shards and the index naming them, as `hf download` leaves a sharded model.
void WriteModel(const TempDir& dir) {
  WriteFile(dir / "model-00001-of-00002.safetensors",
            SafetensorsBytes({{"embed.weight", 300}, {"layers.0.weight", 200}}));
  WriteFile(dir / "model-00002-of-00002.safetensors",
            SafetensorsBytes({{"layers.1.weight", 250}, {"lm_head.weight", 100}}));
  WriteFile(dir / "model.safetensors.index.json",
            R"({"metadata": {"total_size": 850}, "weight_map": {
                 "embed.weight": "model-00001-of-00002.safetensors",
                 "layers.0.weight": "model-00001-of-00002.safetensors",
                 "layers.1.weight": "model-00002-of-00002.safetensors",
                 "lm_head.weight": "model-00002-of-00002.safetensors"}})");
  WriteFile(dir / "config.json", "{}");
  // huggingface_hub's bookkeeping after finished files: no longer *.incomplete.
  WriteFile(dir / ".cache/huggingface/download/model-00001-of-00002.safetensors.metadata", "x");
}

WeightsCheckOutcome Check(const TempDir& dir, const WeightsCheckOptions& options = {}) {
  auto outcome = CheckWeightsComplete(dir.path, options);
  REQUIRE(outcome.ok());
  return *outcome;
}

}  // namespace

TEST_CASE("weights: a complete sharded model passes") {
  TempDir dir;
  WriteModel(dir);
  WeightsCheckOutcome outcome = Check(dir);
  CHECK(outcome.passed);
  std::uint64_t total = fs::file_size(dir / "model-00001-of-00002.safetensors") +
                        fs::file_size(dir / "model-00002-of-00002.safetensors");
  CHECK(outcome.summary ==
        "weights " + dir.path + ": 2 shards complete (" + FormatSize(total) + ")");
  CHECK(outcome.evidence.at("check") == "weights_complete");
  CHECK(outcome.evidence.at("total_bytes").as_uint64() == total);
  CHECK(outcome.evidence.at("shards").as_array().size() == 2);
  CHECK(outcome.evidence.at("shards").as_array()[0].as_object().at("status") == "complete");
  CHECK(outcome.evidence.at("indexes").as_array()[0].as_object().at("shards").as_uint64() == 2);
}

TEST_CASE("weights: a single unindexed shard passes") {
  TempDir dir;
  std::string bytes = SafetensorsBytes({{"w", 100}});
  WriteFile(dir / "model.safetensors", bytes);
  WeightsCheckOutcome outcome = Check(dir);
  CHECK(outcome.passed);
  CHECK(outcome.summary ==
        "weights " + dir.path + ": 1 shard complete (" + std::to_string(bytes.size()) + "B)");
}

TEST_CASE("weights: a shard short by one byte is truncated") {
  TempDir dir;
  WriteModel(dir);
  std::string path = dir / "model-00002-of-00002.safetensors";
  std::uint64_t size = fs::file_size(path);
  fs::resize_file(path, size - 1);
  WeightsCheckOutcome outcome = Check(dir);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "weights " + dir.path +
                               ": shard model-00002-of-00002.safetensors is truncated (" +
                               std::to_string(size - 1) + "B of " + std::to_string(size) + "B)");
  const auto& shard = outcome.evidence.at("shards").as_array()[1].as_object();
  CHECK(shard.at("status") == "truncated");
  CHECK(shard.at("expected_size").as_uint64() == size);
}

TEST_CASE("weights: a shard with bytes past its data fails") {
  TempDir dir;
  WriteModel(dir);
  std::string path = dir / "model-00001-of-00002.safetensors";
  std::uint64_t size = fs::file_size(path);
  fs::resize_file(path, size + 3);
  WeightsCheckOutcome outcome = Check(dir);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "weights " + dir.path +
                               ": shard model-00001-of-00002.safetensors has 3 bytes past the end "
                               "of its data (" +
                               std::to_string(size + 3) + "B, header says " + std::to_string(size) +
                               "B)");
}

TEST_CASE("weights: a shard named in the index is missing") {
  TempDir dir;
  WriteModel(dir);
  fs::remove(dir / "model-00002-of-00002.safetensors");
  WeightsCheckOutcome outcome = Check(dir);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary ==
        "weights " + dir.path + ": model-00002-of-00002.safetensors named in the index is missing");
  const auto& index = outcome.evidence.at("indexes").as_array()[0].as_object();
  CHECK(index.at("missing").as_array().size() == 1);

  fs::remove(dir / "model-00001-of-00002.safetensors");
  CHECK(Check(dir).summary == "weights " + dir.path +
                                  ": 2 shards named in the index are missing "
                                  "(model-00001-of-00002.safetensors, "
                                  "model-00002-of-00002.safetensors)");
}

TEST_CASE("weights: an index in a subdirectory names shards relative to itself") {
  TempDir dir;
  WriteFile(dir / "unet/diffusion.safetensors", SafetensorsBytes({{"w", 10}}));
  WriteFile(dir / "unet/diffusion.safetensors.index.json",
            R"({"weight_map": {"w": "diffusion.safetensors", "v": "diffusion-2.safetensors"}})");
  CHECK(Check(dir).summary ==
        "weights " + dir.path + ": unet/diffusion-2.safetensors named in the index is missing");
}

TEST_CASE("weights: without an index, numbered shards must all be there") {
  TempDir dir;
  // A download cut after two of three shards, before (or without) its index.
  WriteFile(dir / "model-00001-of-00003.safetensors", SafetensorsBytes({{"a", 10}}));
  WriteFile(dir / "model-00002-of-00003.safetensors", SafetensorsBytes({{"b", 10}}));
  WeightsCheckOutcome outcome = Check(dir);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "weights " + dir.path +
                               ": 1 of the 3 shards named model-*-of-00003 is missing (no index): "
                               "model-00003-of-00003.safetensors");
  const auto& series = outcome.evidence.at("numbered").as_array()[0].as_object();
  CHECK(series.at("name") == "model-*-of-00003");
  CHECK(series.at("shards").as_uint64() == 3);
  CHECK(series.at("present").as_uint64() == 2);
  CHECK(boost::json::serialize(series.at("missing")) == R"(["model-00003-of-00003.safetensors"])");

  WriteFile(dir / "model-00003-of-00003.safetensors", SafetensorsBytes({{"c", 10}}));
  outcome = Check(dir);
  CHECK(outcome.passed);
  CHECK(outcome.summary.ends_with(": 3 shards complete (318B)"));

  // Numbers are padded as the names present pad them; the count is taken as written, and a
  // series in a subdirectory is named with it.
  TempDir wide;
  WriteFile(wide / "original/model-00002-of-000005.safetensors", SafetensorsBytes({{"a", 10}}));
  CHECK(Check(wide).summary ==
        "weights " + wide.path +
            ": 4 of the 5 shards named original/model-*-of-000005 are "
            "missing (no index): original/model-00001-of-000005.safetensors, "
            "original/model-00003-of-000005.safetensors, "
            "original/model-00004-of-000005.safetensors, …");
}

TEST_CASE("weights: a directory with an index is judged by the index, not the names") {
  TempDir dir;
  // The index is the truth: it names two shards, whatever their names count.
  WriteFile(dir / "model-00001-of-00003.safetensors", SafetensorsBytes({{"a", 10}}));
  WriteFile(dir / "model-00002-of-00003.safetensors", SafetensorsBytes({{"b", 10}}));
  WriteFile(dir / "model.safetensors.index.json",
            R"({"weight_map": {"a": "model-00001-of-00003.safetensors",
                               "b": "model-00002-of-00003.safetensors"}})");
  WeightsCheckOutcome outcome = Check(dir);
  CHECK(outcome.passed);
  CHECK(outcome.evidence.at("numbered").as_array().empty());
  // Names that only look numbered are not a series.
  TempDir other;
  WriteFile(other / "model-v2-of-x.safetensors", SafetensorsBytes({{"a", 10}}));
  WriteFile(other / "run-0-of-0.safetensors", SafetensorsBytes({{"a", 10}}));
  WriteFile(other / "model-0000001-of-0000002.safetensors", SafetensorsBytes({{"a", 10}}));
  CHECK(Check(other).passed);
}

TEST_CASE("weights: a corrupt index fails") {
  TempDir dir;
  WriteModel(dir);
  WriteFile(dir / "model.safetensors.index.json", R"({"metadata": {}})");
  CHECK(Check(dir).summary ==
        "weights " + dir.path +
            ": model.safetensors.index.json is corrupt: it has no weight_map object");
  WriteFile(dir / "model.safetensors.index.json", R"({"weight_map": {"w": "../x.safetensors"}})");
  CHECK(Check(dir).summary ==
        "weights " + dir.path +
            ": model.safetensors.index.json is corrupt: tensor 'w' names no shard inside the "
            "directory");
}

TEST_CASE("weights: leftover *.incomplete files mean a download in progress") {
  TempDir dir;
  WriteModel(dir);
  WriteFile(dir / ".cache/huggingface/download/model-00003-of-00003.safetensors.abc.incomplete",
            "partial");
  WeightsCheckOutcome outcome = Check(dir);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "weights " + dir.path + ": 1 file still downloading (*.incomplete)");
  WriteFile(dir / "sub/other.bin.def.incomplete", "");
  outcome = Check(dir);
  CHECK(outcome.summary == "weights " + dir.path + ": 2 files still downloading (*.incomplete)");
  CHECK(outcome.evidence.at("incomplete_count").as_uint64() == 2);
  CHECK(outcome.evidence.at("incomplete").as_array()[0] ==
        ".cache/huggingface/download/model-00003-of-00003.safetensors.abc.incomplete");
}

TEST_CASE("weights: a corrupt header length fails without reading the file") {
  TempDir dir;
  std::string bytes = SafetensorsBytes({{"w", 100}});
  // 0xff…: the length of a file that is not safetensors at all.
  std::string garbage = std::string(8, '\xff') + bytes.substr(8);
  WriteFile(dir / "model.safetensors", garbage);
  CHECK(Check(dir).summary == "weights " + dir.path +
                                  ": shard model.safetensors is corrupt: header length "
                                  "18446744073709551615 is over 100MiB");
  // Below 100MiB but longer than the file: cut inside its header.
  WriteFile(dir / "model.safetensors", bytes.substr(0, 20));
  std::uint64_t header_length = static_cast<unsigned char>(bytes[0]);
  CHECK(Check(dir).summary ==
        "weights " + dir.path + ": shard model.safetensors is corrupt: header length " +
            std::to_string(header_length) + " runs past the end of the 20B file");
  WriteFile(dir / "model.safetensors", "abc");
  CHECK(Check(dir).summary ==
        "weights " + dir.path +
            ": shard model.safetensors is corrupt: 3B is too short for a safetensors header");
  std::string not_json = bytes;
  not_json[8] = '[';
  WriteFile(dir / "model.safetensors", not_json);
  CHECK(Check(dir).summary.starts_with(
      "weights " + dir.path + ": shard model.safetensors is corrupt: header is not valid JSON ("));
}

TEST_CASE("weights: a tensor without valid data_offsets is corrupt") {
  TempDir dir;
  std::string header = R"({"w":{"dtype":"U8","shape":[4],"data_offsets":[8,4]}})";
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  WriteFile(dir / "model.safetensors", bytes + header + "12345678");
  CHECK(Check(dir).summary ==
        "weights " + dir.path +
            ": shard model.safetensors is corrupt: tensor 'w' has no valid data_offsets");
}

TEST_CASE("weights: sha256 digests are verified when given") {
  TempDir dir;
  WriteModel(dir);
  std::string first = "model-00001-of-00002.safetensors";
  std::string second = "model-00002-of-00002.safetensors";
  std::string first_digest = Sha256File(dir / first).value();
  std::string second_digest = Sha256File(dir / second).value();
  WeightsCheckOptions options;
  options.sha256[first] = first_digest;
  // Upper case, as some listings print it.
  for (char& c : second_digest) c = static_cast<char>(std::toupper(c));
  options.sha256[second] = second_digest;
  WeightsCheckOutcome outcome = Check(dir, options);
  CHECK(outcome.passed);
  CHECK(outcome.summary.ends_with(" complete (1.2KiB), 2 files match sha256"));
  CHECK(outcome.evidence.at("sha256").as_array()[0].as_object().at("status") == "match");

  // Same length, one byte changed: only the hash can tell.
  std::string bytes = SafetensorsBytes({{"layers.1.weight", 250}, {"lm_head.weight", 100}});
  bytes.back() ^= 1;
  WriteFile(dir / second, bytes);
  outcome = Check(dir, options);
  CHECK_FALSE(outcome.passed);
  std::string actual = Sha256File(dir / second).value();
  std::string expected = second_digest.substr(0, 12);
  for (char& c : expected) c = static_cast<char>(std::tolower(c));
  CHECK(outcome.summary == "weights " + dir.path + ": " + second +
                               " does not match its sha256 (expected " + expected + "…, got " +
                               actual.substr(0, 12) + "…)");
  CHECK(outcome.evidence.at("sha256").as_array()[1].as_object().at("status") == "mismatch");
}

TEST_CASE("weights: sha256 digests of several files hashed at once") {
  TempDir dir;
  WeightsCheckOptions options;
  options.parallel_hashes = 3;
  for (int k = 1; k <= 5; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-00005.safetensors", k);
    WriteFile(dir / name, SafetensorsBytes({{"w", static_cast<std::size_t>(100 * k)}}));
    options.sha256[name] = Sha256File(dir / name).value();
  }
  options.sha256["model-00004-of-00005.safetensors"] = std::string(64, 'e');
  WeightsCheckOutcome outcome = Check(dir, options);
  CHECK_FALSE(outcome.passed);
  CHECK_THAT(
      outcome.summary,
      Catch::EndsWith(": model-00004-of-00005.safetensors does not match "
                      "its sha256 (expected eeeeeeeeeeee…, got " +
                      Sha256File(dir / "model-00004-of-00005.safetensors").value().substr(0, 12) +
                      "…)"));
  const auto& digests = outcome.evidence.at("sha256").as_array();
  REQUIRE(digests.size() == 5);
  for (int k = 0; k < 5; ++k) {
    CHECK(digests[k].as_object().at("status") == (k == 3 ? "mismatch" : "match"));
    CHECK(digests[k].as_object().at("file").as_string() ==
          "model-0000" + std::to_string(k + 1) + "-of-00005.safetensors");
  }
  CHECK(HashParallelism() >= 1);
  CHECK(HashParallelism() <= kMaxParallelHashes);
}

TEST_CASE("weights: a sha256 entry for a missing file fails") {
  TempDir dir;
  WriteModel(dir);
  WeightsCheckOptions options;
  options.sha256["tokenizer.json"] = std::string(64, '0');
  CHECK(Check(dir, options).summary ==
        "weights " + dir.path + ": tokenizer.json listed in sha256 is missing");
}

TEST_CASE("weights: unusable sha256 options are errors") {
  WeightsCheckOptions options;
  options.sha256["x.safetensors"] = "abc";
  auto outcome = CheckWeightsComplete("/nonexistent", options);
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.status().message() ==
        "weights_complete: sha256 for 'x.safetensors' is not 64 hexadecimal digits");
  options.sha256.clear();
  options.sha256["../x.safetensors"] = std::string(64, 'a');
  outcome = CheckWeightsComplete("/nonexistent", options);
  REQUIRE_FALSE(outcome.ok());
  CHECK(outcome.status().message() ==
        "weights_complete: sha256 path '../x.safetensors' must be relative to the directory, "
        "without '..'");
}

TEST_CASE("weights: a directory without safetensors fails") {
  TempDir dir;
  WriteFile(dir / "model.gguf", "GGUF");
  WeightsCheckOutcome outcome = Check(dir);
  CHECK_FALSE(outcome.passed);
  CHECK(outcome.summary == "weights " + dir.path + ": no *.safetensors files");
}

TEST_CASE("weights: a missing directory fails") {
  TempDir dir;
  auto outcome = CheckWeightsComplete(dir / "absent");
  REQUIRE(outcome.ok());
  CHECK_FALSE(outcome->passed);
  CHECK(outcome->summary == "weights " + dir.path + "/absent: does not exist");
  WriteFile(dir / "file", "");
  CHECK(CheckWeightsComplete(dir / "file")->summary ==
        "weights " + dir.path + "/file: is not a directory");
}
