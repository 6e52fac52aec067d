// The names a mistyped word was most likely meant to be, for "unknown command 'stauts' (did you
// mean 'status'?)": those within two edits of it (an edit: a character inserted, deleted,
// replaced, or two neighbours swapped), or that it begins. Plain functions.
#ifndef DEPLOYD_CTL_DID_YOU_MEAN_H_
#define DEPLOYD_CTL_DID_YOU_MEAN_H_

#include <string>
#include <string_view>
#include <vector>

namespace deployd::ctl {

// Edits from `a` to `b` (optimal string alignment distance).
size_t EditDistance(std::string_view a, std::string_view b);

// "'status'", "'retry' or 'resume'", "'a', 'b' or 'c'": the closest of `names`, in their order;
// "" when none is close.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& names);

}  // namespace deployd::ctl

#endif  // DEPLOYD_CTL_DID_YOU_MEAN_H_
