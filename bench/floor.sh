#!/usr/bin/env bash
# The floor of orchestration overhead: N tasks, P at a time, each started with
# `tmux new-session -d` on a private socket and waited for with `tmux wait-for` (it latches a
# signal sent before anyone waits, so no completion is missed; TMUX-NOTES). The pane exits
# with the command, so the session closes itself.
#   floor.sh SOCKET N P [COMMAND] [PREFIX]
set -euo pipefail
socket=$1 n=$2 p=$3 cmd=${4:-/bin/true} prefix=${5:-t}
seq 1 "$n" | xargs -P "$p" -I{} \
  tmux -L "$socket" new-session -d -s "$prefix{}" "$cmd; exec tmux -L $socket wait-for -S $prefix{}" \; wait-for "$prefix{}"
