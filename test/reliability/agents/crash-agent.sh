#!/usr/bin/env bash
# The crash campaign's agent (test/reliability/crash.mjs). Counts its own starts in a file
# outside the repository ($COUNTER_DIR/<task>, one line per start: attempt, pid, and "redo" when
# its prompt carries termorch's conflict section, else "first"), works for $SLEEP seconds, fails
# its first $FAIL_ATTEMPTS attempts (exit 3), then writes out-<task>.txt in its worktree.
# With $SHARED set it also puts its id on line 2 of shared.txt, where another task puts its own:
# the two conflict. Redone (the conflict section in its prompt), it keeps what merged before it
# and adds its line, unless $RESOLVE is "wrong": then it overwrites as the first time.
# With $BREAK set it writes BROKEN in out-<task>.txt, which the run-level gate of the "bisect"
# flavour refuses, unless it runs as a bisect's fix (its feedback section starts it from the
# integration): then it writes what the others do. A fix's start counts as "fix".
set -u
task=${TERMORCH_TASK_ID:?}
attempt=${TERMORCH_ATTEMPT:-0}
kind=first
if [ -n "${TERMORCH_PROMPT_FILE:-}" ] && grep -qxF '```json termorch-conflict' "$TERMORCH_PROMPT_FILE"; then
  kind=redo
elif [ -n "${TERMORCH_PROMPT_FILE:-}" ] && grep -qF '"next_starts_from": "integration"' "$TERMORCH_PROMPT_FILE"; then
  kind=fix
fi
echo "$attempt $$ $kind" >> "$COUNTER_DIR/$task"
sleep "${SLEEP:-0.2}"
if [ "$attempt" -le "${FAIL_ATTEMPTS:-0}" ]; then exit 3; fi
if [ -n "${BREAK:-}" ] && [ "$kind" != fix ]; then
  printf 'BROKEN\n' > "out-$task.txt"
else
  printf '%s\n' "$task" > "out-$task.txt"
fi
if [ -n "${SHARED:-}" ]; then
  if [ "$kind" = redo ] && [ "${RESOLVE:-}" != wrong ]; then
    grep -qxF "$task" shared.txt || printf '%s\n' "$task" >> shared.txt
  else
    sed -i "2s/.*/$task/" shared.txt
  fi
fi
