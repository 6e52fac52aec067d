// AliveActions: per step ("RUN/STEP"), how many of the foreground action processes the daemon
// started have not exited yet, and who waits for there to be none (`logs -f` ends when the
// log's writers have). A process counts from its start until its exit has been handled. One
// thread: the io_context's.
#ifndef DEPLOYD_ENGINE_ALIVE_ACTIONS_H_
#define DEPLOYD_ENGINE_ALIVE_ACTIONS_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace deployd {

class AliveActions {
 public:
  void Started(const std::string& key);
  // One process of `key` has exited; when it was the last, its waiters are called (once).
  void Exited(const std::string& key);
  // Keeps `done` for when none of `key` is alive; false (and `done` dropped) when none is now.
  bool WaitForNone(const std::string& key, std::function<void()> done);

 private:
  std::map<std::string, int> alive_;
  std::map<std::string, std::vector<std::function<void()>>> waiters_;
};

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_ALIVE_ACTIONS_H_
