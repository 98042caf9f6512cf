#!/usr/bin/env bash
# A well-behaved task beside a hostile one (test/reliability/hostile.mjs): deterministic output on
# both streams and one file of its own, so its logs, result and commit can be compared with a run
# without the hostile task.
set -eu
task=${TERMORCH_TASK_ID}
for i in $(seq 1 "${GOOD_LINES:-40}"); do echo "good $task line $i"; done
echo "good $task warning" >&2
mkdir -p good
printf 'made by %s\n' "$task" > "good/$task.txt"
printf 'artifact of %s\n' "$task" > "$TERMORCH_ARTIFACTS_DIR/note.txt"
