#!/usr/bin/env bash
# Soak agent: writes one file named for its run and task, so that no two tasks (of one run or of
# runs sharing the workspace) ever touch the same path and every merge is conflict-free.
set -eu
mkdir -p "soak/$TERMORCH_RUN_ID"
printf '%s\n' "$TERMORCH_TASK_ID" > "soak/$TERMORCH_RUN_ID/$TERMORCH_TASK_ID.txt"
