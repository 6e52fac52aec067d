#include "control/metrics_textfile.h"

#include <spdlog/spdlog.h>

#include <algorithm>

#include "util/atomic_file.h"

namespace deployd {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

Result<std::unique_ptr<MetricsTextfile>> MetricsTextfile::Start(asio::any_io_executor ex,
                                                                std::string path, Render render) {
  auto textfile = std::make_unique<MetricsTextfile>(ex, std::move(path), std::move(render));
  if (Status s = textfile->Write(); !s.ok()) return s;
  textfile->Arm(textfile->last_write_ + kMaxInterval);
  return textfile;
}

MetricsTextfile::MetricsTextfile(asio::any_io_executor ex, std::string path, Render render)
    : path_(std::move(path)), render_(std::move(render)), timer_(ex) {}

void MetricsTextfile::Changed() {
  Clock::time_point soon = std::max(Clock::now(), last_write_ + kMinInterval);
  if (soon < due_) Arm(soon);
}

void MetricsTextfile::Arm(Clock::time_point at) {
  due_ = at;
  timer_.expires_at(at);  // cancels the wait for an earlier time, if any
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    Refresh();
    Arm(last_write_ + kMaxInterval);
  });
}

void MetricsTextfile::Refresh() {
  Status s = Write();
  if (!s.ok() && s.message() != last_error_) {
    spdlog::warn("metrics_textfile: {}; tried again in {}s at the latest", s.message(),
                 kMaxInterval.count());
  } else if (s.ok() && !last_error_.empty()) {
    spdlog::info("metrics_textfile: {} written again", path_);
  }
  last_error_ = s.ok() ? "" : s.message();
}

// The collector may read the file at any moment: it sees the old text or the new one. No
// fsync: after a crash of the host deployd writes it afresh when it starts.
Status MetricsTextfile::Write() {
  last_write_ = Clock::now();
  Result<std::string> text = render_();
  if (!text.ok()) return text.status();
  return WriteFileAtomically(path_, text.value(), 0644, Durability::kProcessCrash);
}

}  // namespace deployd
