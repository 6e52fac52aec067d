#!/bin/sh
# Runs the demo: sets the scene — an "old model server" (with a worker process) serving old
# weights, and a local "model hub" serving new weights, which stalls once halfway — starts
# deployd on a private socket and state directory, applies plans/demo.yaml with live progress,
# shows the run, and cleans up. Usage: tests/demo/run-demo.sh [BUILD_DIR]
# With DEPLOYD_DEMO_STATUS=FILE, the run's `deployctl status --json` is also written to FILE;
# DEPLOYD_DEMO_TOKENS_PER_S sets how fast the new server streams (40 tokens/s by default).
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
tools=$top/tests/demo
bin=${1:-$top/build}/bin
work=$(mktemp -d /tmp/deployd-demo-XXXXXX)
dir=$work/site
rate=${DEPLOYD_DEMO_TOKENS_PER_S:-40}  # how fast the new model server streams an answer

cleanup() {
  set +e
  # The old server leads its own process group (its worker is in it): stop them together.
  [ -n "${old_pid:-}" ] && kill -- "-$old_pid" 2>/dev/null
  [ -n "${hub_pid:-}" ] && kill "$hub_pid" 2>/dev/null
  if [ -n "${new_pid:-}" ] && kill "$new_pid" 2>/dev/null; then
    # Its supervisor records the exit in the state directory: let it finish before removing it.
    for _ in $(seq 50); do
      grep -qs '"exited"' "$work"/state/logs/*/start-server.*.status && break
      sleep 0.1
    done
  fi
  [ -n "${daemon_pid:-}" ] && kill -TERM "$daemon_pid" 2>/dev/null && wait "$daemon_pid"
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

wait_for_port() {
  python3 - "$1" <<'PY'
import socket, sys, time
deadline = time.time() + 30
while time.time() < deadline:
    try:
        socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
        sys.exit(0)
    except OSError:
        time.sleep(0.05)
sys.exit("nothing listens on 127.0.0.1:%s" % sys.argv[1])
PY
}

echo "== the old model server (DEMO::OldServer + DEMO::Worker_0) serves $dir/models/old-3b on 127.0.0.1:18700"
python3 "$tools/make-model.py" "$dir/models/old-3b" --shards 2 --shard-size 1048576
setsid python3 "$tools/model-server.py" --title DEMO::OldServer --worker DEMO::Worker_0 \
  --port 18700 --model "$dir/models/old-3b" >/dev/null 2>&1 &
old_pid=$!

echo "== a local model hub serves demo-7b (4 x 16MiB) on 127.0.0.1:18702; it will stall once"
python3 "$tools/make-model.py" "$work/hub/demo-7b" --shards 4 --shard-size 16777216
python3 "$tools/hub.py" --port 18702 --root "$work/hub" --rate 24MiB \
  --stall-once demo-7b/model-00003-of-00004.safetensors 2>"$work/hub.log" &
hub_pid=$!
wait_for_port 18700
wait_for_port 18702

echo "== starting deployd (state in $work/state; remove confined to $dir)"
printf 'allowed_roots: ["%s"]\n' "$dir" >"$work/deployd.yaml"
"$bin/deployd" --config "$work/deployd.yaml" --socket "$work/deployd.sock" \
  --state-dir "$work/state" 2>"$work/deployd.log" &
daemon_pid=$!
export DEPLOYD_SOCKET="$work/deployd.sock"
for _ in $(seq 50); do [ -S "$DEPLOYD_SOCKET" ] && break; sleep 0.1; done

echo "== deployctl apply plans/demo.yaml --wait"
set +e
"$bin/deployctl" apply "$top/plans/demo.yaml" --var dir="$dir" --var tools="$tools" \
  --var tokens_per_s="$rate" --wait
code=$?
set -e
run=$("$bin/deployctl" runs --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
echo
echo "== deployctl status $run"
"$bin/deployctl" status "$run" || true
"$bin/deployctl" status "$run" --json >"$work/status.json" || true
[ -n "${DEPLOYD_DEMO_STATUS:-}" ] && cp "$work/status.json" "$DEPLOYD_DEMO_STATUS"
new_pid=$(python3 -c '
import json, sys
steps = {s["id"]: s for s in json.load(open(sys.argv[1]))["steps"]}
print(steps["start-server"].get("pid") or "")' "$work/status.json")
python3 - "$work/status.json" "$rate" <<'PY'
import json, sys
steps = {s["id"]: s for s in json.load(open(sys.argv[1]))["steps"]}
f = (steps["smoke-test"].get("evidence") or {}).get("benchmark")
if f:
    print("\n== the new server streams %s tokens/s to each request; the benchmark measured %.1f tokens/s"
          " (%s), TTFT p50 %.0fms p95 %.0fms" % (sys.argv[2], f["tokens_per_s"], f["load"],
                                                f["ttft_p50_ms"], f["ttft_p95_ms"]))
PY
echo
echo "== what each step said (deployctl logs $run STEP)"
for step in stop-old-server remove-old-weights download-weights start-server smoke-test; do
  echo "-- $step"
  "$bin/deployctl" logs "$run" "$step" | sed 's/^/   /'
done
echo
echo "== what the hub saw"
sed 's/^hub: /   /' "$work/hub.log"
exit $code
