#!/usr/bin/env bash
# The crash campaign's tests_cmd gate: a recognisable process (argv[0] `crashgate-sleep`) that
# runs for $GATE_SLEEP seconds, then checks the task's output. The campaign counts gate
# processes still alive once a run (or its resume) has ended: there must be none.
set -u
(exec -a crashgate-sleep sleep "${GATE_SLEEP:-0.3}")
test -f "out-${TERMORCH_TASK_ID:?}.txt"
