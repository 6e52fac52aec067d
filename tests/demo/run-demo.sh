#!/bin/sh
# Runs the demo: starts deployd on a private socket and state directory, starts an "old model
# server" for the plan to replace, applies plans/demo.yaml with live progress, shows the run,
# and cleans up. Usage: tests/demo/run-demo.sh [BUILD_DIR]
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$top/build}/bin
work=$(mktemp -d /tmp/deployd-demo-XXXXXX)
dir=$work/site
mkdir -p "$dir/old"
echo 'old model server' > "$dir/old/index.html"

cleanup() {
  set +e
  [ -f "$dir/old-server.pid" ] && kill "$(cat "$dir/old-server.pid")" 2>/dev/null
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

echo "== starting the old model server on 127.0.0.1:18700"
python3 -m http.server 18700 --bind 127.0.0.1 --directory "$dir/old" >/dev/null 2>&1 &
echo $! > "$dir/old-server.pid"
python3 - <<'PY'
import socket, time
deadline = time.time() + 10
while time.time() < deadline:
    try:
        socket.create_connection(("127.0.0.1", 18700), timeout=1).close()
        break
    except OSError:
        time.sleep(0.05)
PY

echo "== starting deployd (state in $work/state)"
"$bin/deployd" --socket "$work/deployd.sock" --state-dir "$work/state" 2>"$work/deployd.log" &
daemon_pid=$!
export DEPLOYD_SOCKET="$work/deployd.sock"
for _ in $(seq 50); do [ -S "$DEPLOYD_SOCKET" ] && break; sleep 0.1; done

echo "== deployctl apply plans/demo.yaml --wait"
set +e
"$bin/deployctl" apply "$top/plans/demo.yaml" --var dir="$dir" --wait
code=$?
set -e
run=$("$bin/deployctl" runs --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["id"])')
echo
echo "== deployctl status $run"
"$bin/deployctl" status "$run" || true
new_pid=$("$bin/deployctl" status "$run" --json | python3 -c '
import json, sys
steps = {s["id"]: s for s in json.load(sys.stdin)["steps"]}
print(steps["start-server"].get("pid") or "")')
echo
echo "== deployctl logs $run smoke-test"
"$bin/deployctl" logs "$run" smoke-test
exit $code
