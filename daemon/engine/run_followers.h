// RunFollowers: who follows which run live (a `follow` stream, `logs -f`), and the lines
// published to them: each committed event and each progress sample, as the wire protocol
// carries them (protocol/follow_stream.h). One thread: the io_context's.
#ifndef DEPLOYD_ENGINE_RUN_FOLLOWERS_H_
#define DEPLOYD_ENGINE_RUN_FOLLOWERS_H_

#include <boost/json/object.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>

namespace deployd {

class RunFollowers {
 public:
  using Listener = std::function<void(const boost::json::object& line)>;

  // The token removes the listener again.
  std::uint64_t Add(const std::string& run_id, Listener listener);
  void Remove(std::uint64_t token);
  void Clear();
  bool empty() const { return listeners_.empty(); }

  // Gives `line` to each listener of the run as it is. A listener may add or remove listeners
  // meanwhile: the ones called are those there when the line was published.
  void Publish(const std::string& run_id, const boost::json::object& line) const;

 private:
  std::map<std::uint64_t, std::pair<std::string, Listener>> listeners_;
  std::uint64_t next_token_ = 1;
};

}  // namespace deployd

#endif  // DEPLOYD_ENGINE_RUN_FOLLOWERS_H_
