#!/bin/sh
# Checks systemd/deployd.service with systemd-analyze verify, pointing ExecStart at the built
# binary. systemd-analyze reports parse problems as warnings with exit status 0, so any output
# at all is a failure.
set -eu
unit=$1
deployd=$2
command -v systemd-analyze >/dev/null || { echo "systemd-analyze not installed"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s|^ExecStart=/usr/local/bin/deployd|ExecStart=$deployd|" "$unit" > "$dir/deployd.service"
out=$(systemd-analyze verify "$dir/deployd.service" 2>&1) || { echo "$out"; exit 1; }
# Offline, systemd-analyze may note that it cannot talk to the system manager; that is not
# about the unit.
out=$(printf '%s\n' "$out" | grep -v -e 'Failed to connect to bus' -e '^$' || true)
if [ -n "$out" ]; then
  echo "$out"
  exit 1
fi
echo "systemd/deployd.service: ok"
