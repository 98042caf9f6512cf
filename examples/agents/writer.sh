#!/usr/bin/env bash
# A small example agent: reads its context file, "works" for a few seconds (so there is time to
# attach to its tmux session), writes the file its task owns, and leaves a handoff note.
# Usage: writer.sh <context_path>; the file to write comes from the task's env (TARGET_FILE).
set -euo pipefail
context=$1
echo "[$TERMORCH_TASK_ID] starting in $(pwd)"
echo "[$TERMORCH_TASK_ID] context: $(head -n 1 "$context")"
steps=${STEPS:-3}
for i in $(seq 1 "$steps"); do
  echo "[$TERMORCH_TASK_ID] step $i/$steps: thinking..."
  sleep "${STEP_SECONDS:-1}"
done
mkdir -p "$(dirname "$TARGET_FILE")"
{
  echo "// written by task $TERMORCH_TASK_ID (run $TERMORCH_RUN_ID)"
  sed -n '3,$p' "$context"
  # Show that upstream work is visible: list what the dependencies produced.
  for f in ${SEES:-}; do
    if [ -f "$f" ]; then echo "// sees upstream file $f: $(head -n 1 "$f")"; else echo "// MISSING upstream file $f" >&2; exit 3; fi
  done
} > "$TARGET_FILE"
echo "[$TERMORCH_TASK_ID] wrote $TARGET_FILE" 
echo "[$TERMORCH_TASK_ID] a note on stderr: nothing to worry about" >&2
printf '# Handoff from %s\n\nWrote `%s`.\n' "$TERMORCH_TASK_ID" "$TARGET_FILE" > "$TERMORCH_ARTIFACTS_DIR/handoff.md"
echo "[$TERMORCH_TASK_ID] done"
