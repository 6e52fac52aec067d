#include "ctl/did_you_mean.h"

#include <algorithm>

namespace deployd::ctl {

size_t EditDistance(std::string_view a, std::string_view b) {
  // Three rows of the table: a swap looks two back.
  std::vector<size_t> before(b.size() + 1), previous(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) previous[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({previous[j] + 1, row[j - 1] + 1, previous[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        row[j] = std::min(row[j], before[j - 2] + 1);
    }
    std::swap(before, previous);
    std::swap(previous, row);
  }
  return previous[b.size()];
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& names) {
  // A short word is close to too much: one edit for up to three characters.
  const size_t most = word.size() <= 3 ? 1 : 2;
  // A word a name begins with ("stat") is as close as a name one edit away.
  auto score = [&](const std::string& name) {
    if (word.size() >= 2 && name.starts_with(word)) return size_t{1};
    return EditDistance(word, name);
  };
  size_t best = most + 1;
  for (const std::string& name : names) best = std::min(best, score(name));
  std::vector<std::string> closest;
  for (const std::string& name : names)
    if (best <= most && score(name) == best) closest.push_back("'" + name + "'");
  std::string text;
  for (size_t i = 0; i < closest.size(); ++i)
    text += (i == 0 ? "" : i + 1 == closest.size() ? " or " : ", ") + closest[i];
  return text;
}

}  // namespace deployd::ctl
