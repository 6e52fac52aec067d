#include "engine/run_followers.h"

#include <vector>

namespace deployd {

std::uint64_t RunFollowers::Add(const std::string& run_id, Listener listener) {
  std::uint64_t token = next_token_++;
  listeners_[token] = {run_id, std::move(listener)};
  return token;
}

void RunFollowers::Remove(std::uint64_t token) { listeners_.erase(token); }

void RunFollowers::Clear() { listeners_.clear(); }

void RunFollowers::Publish(const std::string& run_id, const boost::json::object& line) const {
  std::vector<Listener> targets;
  for (const auto& [token, entry] : listeners_)
    if (entry.first == run_id) targets.push_back(entry.second);
  for (const auto& listener : targets) listener(line);
}

}  // namespace deployd
