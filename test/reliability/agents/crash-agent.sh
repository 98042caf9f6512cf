#!/usr/bin/env bash
# The crash campaign's agent (test/reliability/crash.mjs). Counts its own starts in a file
# outside the repository ($COUNTER_DIR/<task>, one line per start), works for $SLEEP seconds,
# fails its first $FAIL_ATTEMPTS attempts (exit 3), then writes out-<task>.txt in its worktree.
set -u
task=${TERMORCH_TASK_ID:?}
attempt=${TERMORCH_ATTEMPT:-0}
echo "$attempt $$" >> "$COUNTER_DIR/$task"
sleep "${SLEEP:-0.2}"
if [ "$attempt" -le "${FAIL_ATTEMPTS:-0}" ]; then exit 3; fi
printf '%s\n' "$task" > "out-$task.txt"
