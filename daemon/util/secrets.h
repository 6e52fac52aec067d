// Secrets for plans: the values a `secrets:` section names (an HF_TOKEN for a gated model),
// read when a step fires and given only to the child's environment; and the Redactor that
// replaces them with `***` in whatever a child prints, before a line reaches a log.
//
// A secret comes from a file or from deployd's own environment. A file must be a regular file
// owned by deployd's uid or root and have no permission bits for others (mode & 007 == 0):
// a token anyone on the host can read is already leaked, and one anyone can write is not the
// operator's. Trailing line breaks ("\n", "\r\n") are stripped, as `echo` and editors add
// them. An empty value is an error: an empty token fails later and far less clearly.
//
// Neither LoadSecret nor the Redactor logs or stores a value. A Redactor is immutable once
// built, so it can be shared by every reader of a run's output (single-threaded daemon).
#ifndef DEPLOYD_UTIL_SECRETS_H_
#define DEPLOYD_UTIL_SECRETS_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "deployd/status.h"

namespace deployd {

struct SecretSpec {
  std::string name;  // the environment variable the child gets: [A-Za-z_][A-Za-z0-9_]*
  std::string file;  // an absolute path, or
  std::string env;   // a variable of deployd's environment; exactly one of file and env is set
};

struct Secret {
  std::string name;
  std::string value;
};

// Errors read "secret NAME: <why>", e.g.
//   secret HF_TOKEN: /etc/deployd/hf_token is readable by others (mode 0644); chmod 600 it
//   secret HF_TOKEN: environment variable HF_TOKEN is not set in deployd's environment
// and never contain the value. Opening does not block on a FIFO; files over 64KiB are refused.
Result<Secret> LoadSecret(const SecretSpec& spec);

// Replaces every occurrence of every secret in a line with "***". Occurrences that overlap or
// touch (two secrets side by side, one secret inside another) become a single "***", so no
// fragment of any secret survives and the count of secrets is not revealed either.
//
// Values shorter than kMinLength are not redacted: hiding every "ab" would garble all output
// while protecting nothing a 3-character secret could protect. A value with line breaks is
// matched line by line, since output is redacted one line at a time.
//
// Matching is one table lookup per byte whatever the number of secrets (an Aho-Corasick
// automaton built once); a line without a secret is copied once.
class Redactor {
 public:
  static constexpr std::size_t kMinLength = 4;

  Redactor() = default;
  explicit Redactor(const std::vector<std::string>& secrets);

  std::string Redact(std::string_view line) const;
  bool empty() const { return longest_match_.size() <= 1; }

 private:
  // transitions_[state][byte]: the automaton as a complete DFA; state 0 is the start.
  std::vector<std::array<std::int32_t, 256>> transitions_;
  // The length of the longest secret that ends at a state (0: none), suffixes included.
  std::vector<std::uint32_t> longest_match_;
};

}  // namespace deployd

#endif  // DEPLOYD_UTIL_SECRETS_H_
