#include "engine/active_run.h"

namespace deployd {

void LiveStep::EndBackgroundWatch() {
  output.reset();
  if (background) background->Forget();
  background.reset();
}

void LiveStep::StopProgress() {
  if (!progress) return;
  progress->Stop();
  progress.reset();
}

}  // namespace deployd
