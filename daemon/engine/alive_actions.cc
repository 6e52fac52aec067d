#include "engine/alive_actions.h"

namespace deployd {

void AliveActions::Started(const std::string& key) { ++alive_[key]; }

void AliveActions::Exited(const std::string& key) {
  if (--alive_[key] > 0) return;
  alive_.erase(key);
  auto waiters = waiters_.extract(key);
  if (!waiters.empty())
    for (auto& done : waiters.mapped()) done();
}

bool AliveActions::WaitForNone(const std::string& key, std::function<void()> done) {
  if (!alive_.count(key)) return false;
  waiters_[key].push_back(std::move(done));
  return true;
}

}  // namespace deployd
