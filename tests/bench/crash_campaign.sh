#!/bin/sh
# The long crash-injection campaign (the suite runs 30 points): SIGKILL of deployd at POINTS
# random moments over 20-step plans, each followed by a restart; the same assertions as
# tests/integration/test_crash_campaign.py. Usage: tests/bench/crash_campaign.sh [POINTS] [SEED]
# (build first; DEPLOYD_BIN/DEPLOYCTL_BIN default to build/bin).
set -eu
cd "$(dirname "$0")/../integration"
export CRASH_POINTS="${1:-500}"
[ -n "${2:-}" ] && export DEPLOYD_CRASH_SEED="$2"
exec python3 -m unittest -v test_crash_campaign
