#include "process/orphan_stop.h"

#include <signal.h>

#include <boost/asio/post.hpp>

#include "process/process_identity.h"
#include "process/supervisor.h"

namespace deployd {

namespace asio = boost::asio;

OrphanStop::OrphanStop(asio::any_io_executor ex) : timer_(ex) {}

std::shared_ptr<OrphanStop> OrphanStop::Start(asio::any_io_executor ex,
                                              std::vector<ProcStat> processes, Duration grace,
                                              Done done) {
  auto self = std::shared_ptr<OrphanStop>(new OrphanStop(ex));
  self->done_ = std::move(done);
  for (ProcStat& p : processes) {
    Result<std::unique_ptr<ProcessExitWatch>> watch =
        ProcessExitWatch::Open(ex, ProcessIdentity{p.pid, p.start_time, CurrentBootId()});
    if (!watch.ok()) continue;  // gone already, or another process has the pid now
    self->targets_.push_back({std::move(p), std::move(watch.value()), false});
  }
  self->left_ = self->targets_.size();
  std::weak_ptr<OrphanStop> weak = self;
  for (size_t i = 0; i < self->targets_.size(); ++i) {
    self->targets_[i].watch->AsyncWait([weak, i] {
      if (auto s = weak.lock()) s->OnGone(i);
    });
  }
  if (self->left_ == 0) {
    asio::post(ex, [self] { self->Finish(); });
    return self;
  }
  self->Signal(SIGTERM);
  self->Signal(SIGCONT);  // a stopped process cannot act on SIGTERM
  self->timer_.expires_after(grace);
  self->timer_.async_wait([weak](boost::system::error_code ec) {
    auto s = weak.lock();
    if (ec || !s) return;
    s->killed_ = true;
    s->Signal(SIGKILL);
    s->timer_.expires_after(kKillWait);
    s->timer_.async_wait([weak](boost::system::error_code ec) {
      if (auto s = weak.lock(); s && !ec) s->Finish();
    });
  });
  return self;
}

void OrphanStop::Cancel() {
  done_ = nullptr;
  timer_.cancel();
}

void OrphanStop::Signal(int sig) {
  for (Target& t : targets_)
    if (!t.gone) t.watch->Signal(sig);
}

void OrphanStop::OnGone(size_t index) {
  if (targets_[index].gone) return;
  targets_[index].gone = true;
  if (--left_ == 0) Finish();
}

void OrphanStop::Finish() {
  timer_.cancel();
  if (!done_) return;
  std::vector<ProcStat> stuck;
  for (const Target& t : targets_)
    if (!t.gone) stuck.push_back(t.process);
  Done done = std::move(done_);
  done_ = nullptr;
  done(std::move(stuck));
}

}  // namespace deployd
