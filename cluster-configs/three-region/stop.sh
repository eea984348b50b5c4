#!/usr/bin/env bash
# Stops the cluster started by start.sh, by PID, and waits for it.
set -euo pipefail
cd "$(dirname "$0")/../.."
PIDS=.cluster/pids
[ -s "$PIDS" ] || { echo "no cluster running"; exit 0; }
while read -r pid name; do
  kill -TERM "$pid" 2>/dev/null && echo "stopping $name ($pid)" || true
done < "$PIDS"
for _ in $(seq 1 150); do
  alive=0
  while read -r pid _; do kill -0 "$pid" 2>/dev/null && alive=1; done < "$PIDS"
  [ $alive -eq 0 ] && break
  sleep 0.2
done
while read -r pid _; do kill -KILL "$pid" 2>/dev/null || true; done < "$PIDS"
rm -f "$PIDS"
