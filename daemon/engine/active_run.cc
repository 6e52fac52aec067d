#include "engine/active_run.h"

namespace deployd {

void LiveStep::EndAttemptWatch() {
  output.reset();
  if (attempt) attempt->Forget();
  attempt.reset();
}

void LiveStep::StopFollowers() {
  if (journal) journal->Stop();
  journal.reset();
  if (kernel_log) kernel_log->Stop();
  kernel_log.reset();
}

void LiveStep::StopProgress() {
  if (!progress) return;
  progress->Stop();
  progress.reset();
}

}  // namespace deployd
