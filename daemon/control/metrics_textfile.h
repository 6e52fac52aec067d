// MetricsTextfile: a node_exporter textfile (`metrics_textfile:` in deployd.yaml) that deployd
// keeps up to date: written atomically (a hidden temporary file renamed over it, so the
// collector never reads half of one), again soon after something changes — at most once every
// kMinInterval — and at least every kMaxInterval, so that the uptime and a storage fault's
// length stay fresh while nothing happens. A timer on the daemon's io_context does both; no
// thread, no loop. A write that fails is logged once (and once more when writes succeed again)
// and tried again at the next occasion.
//
// One thread: the daemon's io_context.
#ifndef DEPLOYD_CONTROL_METRICS_TEXTFILE_H_
#define DEPLOYD_CONTROL_METRICS_TEXTFILE_H_

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "deployd/status.h"

namespace deployd {

class MetricsTextfile {
 public:
  static constexpr std::chrono::seconds kMinInterval{1};
  static constexpr std::chrono::seconds kMaxInterval{15};

  // The exposition text, rendered now.
  using Render = std::function<Result<std::string>()>;

  // Writes the file once now, and keeps it up to date from then on. Refuses when that first
  // write fails: "cannot write /srv/prom/deployd.prom: Permission denied".
  static Result<std::unique_ptr<MetricsTextfile>> Start(boost::asio::any_io_executor ex,
                                                        std::string path, Render render);
  MetricsTextfile(boost::asio::any_io_executor ex, std::string path, Render render);

  // Something the metrics count changed: the file is written again soon.
  void Changed();

 private:
  Status Write();
  // Writes, and logs a failure once (and when writes succeed again).
  void Refresh();
  void Arm(std::chrono::steady_clock::time_point at);

  std::string path_;
  Render render_;
  boost::asio::steady_timer timer_;
  std::chrono::steady_clock::time_point last_write_;
  std::chrono::steady_clock::time_point due_;
  std::string last_error_;  // "" while writes succeed
};

}  // namespace deployd

#endif  // DEPLOYD_CONTROL_METRICS_TEXTFILE_H_
