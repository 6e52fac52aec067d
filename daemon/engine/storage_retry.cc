// RunManager: when the store refuses a write. A full disk or an I/O error must not wedge a run,
// nor may anything happen that is not recorded first. So the operation whose commit failed —
// it has changed nothing yet — is held, and so is every event and decision that comes after it
// (Dispatch, Advance, Start, … look at Blocked() first), in the order they came. A timer tries
// the first one again with a backoff (StorageFault); once it is recorded, the others follow in
// order, each deciding afresh on what is recorded by then, and the runs go on. Meanwhile status,
// why, the log and systemd's STATUS= say what deployd cannot record and since when.
//
// When the files themselves are gone (deleted or replaced under deployd, or damaged), nothing
// is tried again: deployd stops (RunManagerOptions::on_store_lost).
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include "engine/active_run.h"
#include "engine/run_manager.h"
#include "util/clock.h"
#include "util/units.h"

namespace deployd {

namespace asio = boost::asio;

void RunManager::Hold(std::function<void()> op) {
  if (store_lost_) return;  // deployd is stopping: nothing more is recorded
  // While the first of them is tried again, what it holds (itself again, or what it led to)
  // comes before the operations that were already waiting behind it.
  if (draining_) {
    held_.insert(held_.begin() + static_cast<std::ptrdiff_t>(insert_at_++), std::move(op));
  } else {
    held_.push_back(std::move(op));
  }
}

void RunManager::HoldFor(ActiveRun& run, void (RunManager::*op)(ActiveRun&)) {
  Hold([this, id = run.record.id, op] {
    if (ActiveRun* r = Find(id)) (this->*op)(*r);
  });
}

Result<EventRecord> RunManager::Record(const Transition& t) {
  Result<EventRecord> stored = store_.Commit(t);
  if (stored.ok()) return stored;
  const std::string& error = stored.status().message();
  switch (store_.last_failure()) {
    case RunStore::Failure::kStorage: {
      const bool first = !fault_.active();
      std::chrono::milliseconds delay = fault_.Failed(error, NowMs());
      ++fault_totals_.failed_writes;
      if (first) ++fault_totals_.faults;
      blocked_ = true;
      if (first) {
        spdlog::error(
            "{}; it waits, and so does everything after it, until it is recorded "
            "(next try in {})",
            error, FormatDuration(delay));
      } else {
        spdlog::warn("still {}", fault_.Describe(NowMs(), held_.size() + 1));
      }
      if (options_.on_activity) options_.on_activity(fault_.Describe(NowMs(), held_.size() + 1));
      if (!draining_) ArmStorageRetry(delay);
      break;
    }
    case RunStore::Failure::kFilesLost:
      blocked_ = true;
      if (!store_lost_) {
        store_lost_ = true;
        held_.clear();
        spdlog::critical("{}", error);
        if (options_.on_store_lost)
          asio::post(ex_, [f = options_.on_store_lost, error] { f(error); });
      }
      break;
    case RunStore::Failure::kRefused:
      spdlog::error("{} {}: cannot record {}: {}", t.run_id, t.event.step_id, t.event.kind, error);
      break;
  }
  return stored;
}

void RunManager::ArmStorageRetry(std::chrono::milliseconds delay) {
  if (!retry_timer_) retry_timer_ = std::make_unique<asio::steady_timer>(ex_);
  retry_timer_->expires_after(delay);
  retry_timer_->async_wait([this](boost::system::error_code ec) {
    if (!ec) RetryHeld();
  });
}

void RunManager::RetryHeld() {
  if (store_lost_ || !blocked_) return;
  const size_t waiting = held_.size();
  draining_ = true;
  blocked_ = false;
  while (!held_.empty() && !blocked_) {
    std::function<void()> op = std::move(held_.front());
    held_.pop_front();
    insert_at_ = 0;
    op();
  }
  draining_ = false;
  if (store_lost_) return;
  if (blocked_) {
    ArmStorageRetry(
        std::chrono::milliseconds(std::max<std::int64_t>(0, fault_.next_try_at_ms() - NowMs())));
    return;
  }
  std::int64_t lasted = fault_.Cleared(NowMs());
  fault_totals_.fault_ms += lasted;
  std::string note =
      "recording again after " + FormatDuration(Duration(lasted)) + "; the " +
      std::to_string(waiting) +
      (waiting == 1 ? " transition that waited is" : " transitions that waited are") +
      " recorded, in order";
  spdlog::info("{}", note);
  if (options_.on_activity) options_.on_activity(note);
}

Status RunManager::RefuseWhileBlocked() const {
  if (store_lost_) return Status::Error("deployd is stopping: its state database is gone");
  if (!fault_.active()) return Status::Ok();
  return Status::Error("deployd " + fault_.Describe(NowMs(), held_.size()) +
                       "; nothing new is accepted until it can record again");
}

void RunManager::AddStorageFault(WireRun& run) const {
  if (fault_.active() && runs_.count(run.id))
    run.storage_fault = fault_.Describe(NowMs(), held_.size());
}

}  // namespace deployd
