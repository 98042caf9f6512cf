#!/bin/sh
# termorch's container entrypoint (the image runs it under tini). It also runs on a plain host,
# which is how the tests check it: TERMORCH_BIN names the termorch to start.
#
#   entrypoint.sh daemon [termorch daemon options]   prepares the daemon's home, then execs termorch daemon
#   entrypoint.sh worker [termorch worker options]   prepares the worker's folder, then execs termorch worker
#   entrypoint.sh -x ...                             a first argument that is a flag: termorch -x ...
#   entrypoint.sh anything else ...                  runs as it is (a shell, git, termorch status ...)
#
# Environment (the image sets the paths):
#   TERMORCH_BIN          the termorch executable (default: termorch on PATH)
#   TERMORCH_HOME         the daemon's home when the command names no --home
#   TERMORCH_WORKDIR      the worker's folder when the command names no --workdir
#   TERMORCH_REMOTE       the bare git remote (a path) that TERMORCH_REMOTE_INIT=1 creates when absent
#   TERMORCH_ROLE_FILE    where to record the role, pid and folder for the healthcheck (unset: not recorded)
#   TERMORCH_ALLOW_ROOT   1 lets the daemon or a worker run as root
#
# Errors exit 2 (termorch's code for invalid input or usage) before anything starts.
set -eu

me=termorch-entrypoint
bin=${TERMORCH_BIN:-termorch}

die() {
  printf '%s: %s\n' "$me" "$*" >&2
  exit 2
}

# Creates a folder termorch writes to when it is missing (private: runs hold logs and agents' output)
# and checks it is usable. An existing folder is never chmodded: it may be a volume or a bind mount
# whose mode the operator chose, or a symlink whose target is not ours to change.
prepare_dir() {
  if [ -L "$1" ] && [ ! -e "$1" ]; then
    die "$1 is a symlink to nothing ($(readlink "$1")): create its target or remove the link"
  fi
  if [ ! -e "$1" ]; then
    (umask 077 && mkdir -p -- "$1") || die "cannot create $1: check the volume or the parent folder's owner"
  fi
  [ -d "$1" ] || die "$1 is not a folder: move it away or point $2 elsewhere"
  if [ ! -w "$1" ] || [ ! -x "$1" ]; then
    die "$1 is not writable by uid $(id -u): give it to that user (chown) or run as its owner"
  fi
}

# Creates the bare remote the coordinator and the workers share, when TERMORCH_REMOTE_INIT=1. Built
# aside and renamed into place, so containers starting together cannot init the same folder at once:
# the loser of the rename throws its copy away.
init_remote() {
  remote=${TERMORCH_REMOTE:-}
  [ -n "$remote" ] || die "TERMORCH_REMOTE_INIT=1 needs TERMORCH_REMOTE (the bare repository's path)"
  case $remote in
    /*) ;;
    *) die "TERMORCH_REMOTE must be an absolute path to create it (got \"$remote\"); a URL's remote is created where it lives" ;;
  esac
  if [ -e "$remote" ] || [ -L "$remote" ]; then
    [ -d "$remote" ] || die "TERMORCH_REMOTE $remote exists and is not a folder"
    if [ "$(git --git-dir="$remote" rev-parse --is-bare-repository 2>/dev/null || true)" = true ]; then
      return 0
    fi
    # A volume mounted right on the remote's path is an empty folder: the repository goes in it.
    [ -z "$(ls -A -- "$remote")" ] ||
      die "TERMORCH_REMOTE $remote is neither a bare git repository nor empty: refusing to init over its files"
    git init -q --bare -- "$remote" || die "git init --bare $remote failed"
    return 0
  fi
  parent=$(dirname -- "$remote")
  prepare_dir "$parent" TERMORCH_REMOTE
  aside=$(mktemp -d "$parent/.remote-init.XXXXXX") || die "cannot create a folder in $parent"
  if ! git init -q --bare -- "$aside"; then
    rm -rf -- "$aside"
    die "git init --bare in $parent failed"
  fi
  mv -T -- "$aside" "$remote" 2>/dev/null || rm -rf -- "$aside"
  [ "$(git --git-dir="$remote" rev-parse --is-bare-repository 2>/dev/null || true)" = true ] ||
    die "TERMORCH_REMOTE $remote is not a bare git repository after init"
}

# The value of option $1 (--x V or --x=V) in the remaining arguments; empty when absent.
option_value() {
  name=$1
  shift
  while [ $# -gt 0 ]; do
    case $1 in
      "$name")
        case ${2:-} in
          '' | -*) die "$name needs a value (a folder), as in $name /var/lib/termorch" ;;
        esac
        printf '%s\n' "$2"
        return 0
        ;;
      "$name"=*)
        value=${1#*=}
        [ -n "$value" ] || die "$name= needs a value (a folder)"
        printf '%s\n' "$value"
        return 0
        ;;
      --) return 0 ;;
    esac
    shift
  done
}

# Records what the healthcheck needs: after exec, this shell's pid is termorch's.
record_role() {
  [ -n "${TERMORCH_ROLE_FILE:-}" ] || return 0
  case $2 in
    *'
'*) die "$2 has a newline in its name: choose another folder" ;;
  esac
  prepare_dir "$(dirname -- "$TERMORCH_ROLE_FILE")" TERMORCH_ROLE_FILE
  tmp="$TERMORCH_ROLE_FILE.$$"
  if ! { printf 'role=%s\npid=%s\ndir=%s\n' "$1" "$$" "$2" >"$tmp" && mv -f -- "$tmp" "$TERMORCH_ROLE_FILE"; }; then
    die "cannot write $TERMORCH_ROLE_FILE"
  fi
}

# Whether the arguments ask for help: then nothing is prepared, only termorch's usage printed.
wants_help() {
  for arg in "$@"; do
    case $arg in
      -h | --help) return 0 ;;
      --) return 1 ;;
    esac
  done
  return 1
}

absolute() {
  case $1 in
    /*) printf '%s\n' "$1" ;;
    *) printf '%s/%s\n' "$PWD" "$1" ;;
  esac
}

refuse_root() {
  # Agents run with termorch's powers and do what their prompts make of them: as root in a container
  # that is every file of every volume, and whatever the container can reach of the host.
  if [ "$(id -u)" = 0 ] && [ "${TERMORCH_ALLOW_ROOT:-0}" != 1 ]; then
    die "refusing to run termorch $1 as root: run as a non-root user (the image's is termorch, uid 10001), or set TERMORCH_ALLOW_ROOT=1"
  fi
}

if { [ "${1:-}" = daemon ] || [ "${1:-}" = worker ]; } && wants_help "$@"; then
  exec "$bin" "$@"
fi

case ${1:-} in
  daemon)
    shift
    refuse_root daemon
    home=$(option_value --home "$@") || exit 2
    if [ -z "$home" ]; then
      home=${TERMORCH_HOME:-}
      [ -n "$home" ] || die "daemon needs --home DIR (or TERMORCH_HOME): the folder of its inbox/, outbox/, runs/ and logs/"
      set -- --home "$home" "$@"
    fi
    for sub in "" /inbox /outbox /runs /logs; do prepare_dir "$home$sub" --home; done
    [ -z "${TMPDIR:-}" ] || prepare_dir "$TMPDIR" TMPDIR
    [ "${TERMORCH_REMOTE_INIT:-0}" != 1 ] || init_remote
    record_role daemon "$(absolute "$home")"
    exec "$bin" daemon "$@"
    ;;
  worker)
    shift
    refuse_root worker
    workdir=$(option_value --workdir "$@") || exit 2
    if [ -z "$workdir" ] && [ -n "${TERMORCH_WORKDIR:-}" ]; then
      workdir=$TERMORCH_WORKDIR
      set -- --workdir "$workdir" "$@"
    fi
    [ -z "$workdir" ] || prepare_dir "$workdir" --workdir
    [ -z "${TMPDIR:-}" ] || prepare_dir "$TMPDIR" TMPDIR
    [ "${TERMORCH_REMOTE_INIT:-0}" != 1 ] || init_remote
    [ -z "$workdir" ] || record_role worker "$(absolute "$workdir")"
    exec "$bin" worker "$@"
    ;;
  -*)
    exec "$bin" "$@"
    ;;
  "")
    die "no command: give daemon, worker, a termorch flag (--help) or a program to run"
    ;;
  *)
    exec "$@"
    ;;
esac
