#!/usr/bin/env bash
# Isolation agent: prints to both streams, waits until $GATE exists (so the campaign can look at
# a live run: its session, socket and private files), then writes one file in its worktree and
# exits $FAIL (default 0).
set -eu
echo "out of $TERMORCH_TASK_ID"
echo "err of $TERMORCH_TASK_ID" >&2
if [ -n "${GATE:-}" ]; then
  while [ ! -e "$GATE" ]; do sleep 0.05; done
fi
printf '%s\n' "$TERMORCH_TASK_ID" > "iso-$TERMORCH_TASK_ID.txt"
exit "${FAIL:-0}"
