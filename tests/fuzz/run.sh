#!/bin/sh
# Runs deployd's libFuzzer harnesses (tests/fuzz/README.md).
#
#   tests/fuzz/run.sh [SECONDS [TARGET...]]
#       On demand: builds build-fuzz/ (tests/fuzz/build.sh), then runs each TARGET (all of
#       them by default) for SECONDS (600: the 10 minutes of a full run), one after another.
#   tests/fuzz/run.sh --one BUILD_DIR TARGET
#       One target from the build in BUILD_DIR for DEPLOYD_FUZZ_SECONDS (30), as CTest's
#       fuzz.TARGET runs it; exits 77 (skipped) with the reason when there is no fuzz build.
#
# Each run starts from the committed corpus (tests/fuzz/corpus/TARGET/, read only) and from
# what earlier runs found (BUILD_DIR/work/TARGET/corpus/), with -rss_limit_mb=2048 and
# -timeout=10. A crash, leak, timeout or out-of-memory fails the run and leaves the input in
# BUILD_DIR/work/TARGET/artifacts/; the last lines of libFuzzer's log and its final figures
# (executions, cov:) are printed either way.
set -u
src=$(cd "$(dirname "$0")/../.." && pwd)
targets="plan_parser control_request builtin_request progress_line weights nvidia_smi version
units inventory"

run_one() { # BUILD_DIR TARGET SECONDS
  dir=$1 target=$2 seconds=$3
  bin=$dir/bin/fuzz_$target
  if [ ! -x "$bin" ]; then
    echo "fuzz.$target skipped: $(cat "$dir/unavailable" 2>/dev/null ||
      echo "no fuzz build in $dir (tests/fuzz/build.sh)")"
    return 77
  fi
  work=$dir/work/$target
  mkdir -p "$work/corpus" "$work/artifacts"
  "$bin" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" "$work/corpus" "$src/tests/fuzz/corpus/$target" \
    >"$work/log" 2>&1
  status=$?
  if [ $status -ne 0 ]; then
    tail -n 60 "$work/log"
    echo "fuzz.$target: FINDING (exit $status) after $seconds s at most; input in $work/artifacts/:"
    ls "$work/artifacts"
    return 1
  fi
  done_line=$(grep -a 'DONE' "$work/log" | tail -n 1)
  execs=$(grep -a 'stat::number_of_executed_units' "$work/log" | awk '{print $2}')
  echo "fuzz.$target: no finding in $seconds s: $execs executions; ${done_line#*DONE   }"
  return 0
}

if [ "${1:-}" = --one ]; then
  run_one "$2" "$3" "${DEPLOYD_FUZZ_SECONDS:-30}"
  exit $?
fi

seconds=${1:-600}
[ $# -gt 0 ] && shift
[ $# -gt 0 ] && targets=$*
dir=${DEPLOYD_FUZZ_BUILD:-$src/build-fuzz}
sh "$src/tests/fuzz/build.sh" "$src" "$dir" || exit $?
failed=0
for target in $targets; do
  run_one "$dir" "$target" "$seconds" || failed=1
done
exit $failed
