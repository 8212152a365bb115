#!/usr/bin/env bash
# Runs the hub and the knowledge service in the foreground; Ctrl-C (or SIGTERM)
# stops both and waits for their clean shutdown. Ports and paths come from flags'
# environment variables (see `python -m hubsvc --help`, `python -m knowledgesvc --help`).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

$PY -m hubsvc &
HUB=$!
$PY -m knowledgesvc &
KNOW=$!

stop() { kill -TERM "$HUB" "$KNOW" 2>/dev/null || true; }
trap stop INT TERM

# Return when either service exits (a taken port, a crash) or a signal arrives,
# then stop the other one and report the worst exit status.
wait -n "$HUB" "$KNOW"
stop
wait "$HUB"; hub_status=$?
wait "$KNOW"; know_status=$?
exit $(( hub_status > know_status ? hub_status : know_status ))
