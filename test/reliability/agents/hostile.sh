#!/usr/bin/env bash
# A hostile agent for test/reliability/hostile.mjs, steered by its environment:
#   KIND     what it does (the cases below)      VARIANT  which form of it (a, b, c, ...)
#   SIZE     bytes of output                     SPLIT    where a secret is cut across writes
#   COUNT    how many processes or refs          SCRATCH  a folder outside the repository, where
#            it records the pids that must not outlive the task (pids/*) and what it did
#   API_TOKEN, DB_PASSWORD  the canary secrets (passed by termorch as secret env vars)
# Everything it does is bounded: sizes, counts and the fork limit are the campaign's.
set -u
cd "$(pwd -P)" || exit 99
wt=$(git rev-parse --show-toplevel 2>/dev/null || pwd)
common=$(git rev-parse --path-format=absolute --git-common-dir 2>/dev/null || echo "")
main=${common%/.git}
pids=$SCRATCH/pids
mkdir -p "$pids"
V=${VARIANT:-a}
record() { echo "$1" > "$pids/$2"; }
node_out() { node -e "$1"; }

case $KIND in
output)
  line=$(printf 'hostile output %.0s' 1 2 3 4 5 6)
  if [ "$V" = b ]; then yes "$line" | head -c "$SIZE" >&2; else yes "$line" | head -c "$SIZE"; fi
  ;;
binary)
  head -c "$SIZE" /dev/urandom
  head -c $((SIZE / 4)) /dev/urandom >&2
  ;;
longline)
  # One line of SIZE bytes and no newline, on stdout (a) or stderr (b), then the canary after it.
  if [ "$V" = b ]; then head -c "$SIZE" /dev/zero | tr '\0' 'L' >&2; else head -c "$SIZE" /dev/zero | tr '\0' 'L'; fi
  printf '%s' "$API_TOKEN"
  ;;
escapes)
  clip=$(printf 'pwned' | base64)
  printf '\e]0;hostile title\a\e]2;window\e\\\ekname\e\\'
  printf '\e]52;c;%s\a' "$clip"
  printf '\ePtmux;\e\e]52;c;%s\a\e\\' "$clip"
  printf '\ePtmux;\e\e]0;passthrough title\a\e\\'
  printf '\e[6n\e[c\e]10;?\a\e[?1049h\e[2J\e[?25l\e[?1000h\ec'
  printf 'secret in a title: \e]0;%s\a\n' "$API_TOKEN"
  printf 'secret in a clipboard: \e]52;c;%s\a\n' "$API_TOKEN"
  printf '\e[31mred\e[0m done\n'
  ;;
sigterm)
  # Ignores TERM, HUP and INT; only KILL ends it (the task has a short timeout).
  if [ "$V" = b ]; then
    trap '' TERM HUP INT
    record $$ agent
    while :; do sleep 0.2 || :; done
  fi
  exec perl -e '$SIG{$_} = "IGNORE" for qw(TERM HUP INT); open(my $f, ">", "$ENV{SCRATCH}/pids/agent"); print $f "$$\n"; close $f; sleep 1 while 1'
  ;;
setsid)
  case $V in
  a) setsid bash -c 'echo $$ > "$SCRATCH/pids/daemon"; exec sleep 600' </dev/null >/dev/null 2>&1 & ;;
  b) setsid -f bash -c 'echo $$ > "$SCRATCH/pids/daemon"; exec sleep 600' </dev/null >/dev/null 2>&1 ;;
  # Keeps the task's output pipes open: the supervisor waits for their end.
  c) setsid bash -c 'echo $$ > "$SCRATCH/pids/daemon"; while :; do echo tick; sleep 1; done' & ;;
  esac
  for _ in $(seq 1 100); do [ -s "$pids/daemon" ] && break; sleep 0.02; done
  echo "left a daemon behind"
  ;;
killsup)
  # Finds its pane supervisor among its ancestors and kills it.
  p=$$
  while [ "$p" -gt 1 ]; do
    p=$(awk '{print $4}' "/proc/$p/stat")
    if tr '\0' ' ' < "/proc/$p/cmdline" | grep -q supervisor.pl; then
      echo "killing my supervisor $p"
      if [ "$V" = b ]; then kill -TERM "$p"; else kill -KILL "$p"; fi
      break
    fi
  done
  record $$ agent
  sleep 3
  ;;
rmworktree)
  if [ "$V" = b ]; then echo "garbage" > README.md; fi
  cd / && rm -rf "$wt"
  ;;
gitfile)
  echo "changed" > README.md
  case $V in
  a) echo "gitdir: /nonexistent/hostile" > "$wt/.git" ;;
  b) rm -f "$wt/.git" ;;
  # Points its worktree at the main repository's own git dir: a commit there would land on the
  # user's checked-out branch.
  c) echo "gitdir: $common" > "$wt/.git" ;;
  esac
  ;;
gitcommon)
  echo "changed" > README.md
  hook='#!/bin/sh
echo "$0 ran in $PWD" >> "'"$SCRATCH"'/hooks-ran"
echo "hook: ${API_TOKEN:-no token} ${DB_PASSWORD:-}"
exit 0'
  case $V in
  a)
    mkdir -p "$common/hooks"
    for h in pre-commit commit-msg post-commit pre-merge-commit post-merge reference-transaction post-checkout; do
      printf '%s\n' "$hook" > "$common/hooks/$h"
      chmod +x "$common/hooks/$h"
    done
    ;;
  b)
    mkdir -p "$SCRATCH/hooks"
    for h in pre-commit commit-msg post-commit post-merge reference-transaction post-checkout; do
      printf '%s\n' "$hook" > "$SCRATCH/hooks/$h"
      chmod +x "$SCRATCH/hooks/$h"
    done
    git config --file "$common/config" core.hooksPath "$SCRATCH/hooks"
    ;;
  c) git config --file "$common/config" user.name "$API_TOKEN" ;;
  # Commands git runs from configuration: termorch's git calls would run them with its own
  # environment (the agent's is a filtered one).
  d)
    printf '%s\n' "$hook" > "$SCRATCH/fsmonitor"
    chmod +x "$SCRATCH/fsmonitor"
    git config --file "$common/config" core.fsmonitor "$SCRATCH/fsmonitor"
    ;;
  e)
    printf '#!/bin/sh\necho "$0 ran in $PWD" >> "%s/hooks-ran"\ncat\n' "$SCRATCH" > "$SCRATCH/filter"
    chmod +x "$SCRATCH/filter"
    git config --file "$common/config" filter.hostile.clean "$SCRATCH/filter"
    git config --file "$common/config" filter.hostile.smudge "$SCRATCH/filter"
    git config --file "$common/config" merge.hostile.driver "$SCRATCH/filter %O %A %B"
    echo '* filter=hostile merge=hostile' > .gitattributes
    ;;
  f)
    printf '[core]\n\tfsmonitor = %s/fsmonitor\n' "$SCRATCH" > "$SCRATCH/included"
    printf '%s\n' "$hook" > "$SCRATCH/fsmonitor"
    chmod +x "$SCRATCH/fsmonitor"
    git config --file "$common/config" include.path "$SCRATCH/included"
    ;;
  esac
  ;;
movebranch)
  echo "changed" > README.md
  case $V in
  a)
    tree=$(git -C "$main" rev-parse 'main^{tree}')
    c=$(git -C "$main" commit-tree -p main -m "hostile commit" "$tree")
    git -C "$main" update-ref refs/heads/main "$c"
    echo "$c" > "$SCRATCH/moved-to"
    ;;
  b) git -C "$main" update-ref -d refs/heads/main ;;
  c)
    # Rewinds the user's branch to an unrelated root commit.
    c=$(git -C "$main" commit-tree -m "orphan" "$(git -C "$main" mktree </dev/null)")
    git -C "$main" update-ref refs/heads/main "$c"
    echo "$c" > "$SCRATCH/moved-to"
    ;;
  esac
  ;;
branches)
  echo "changed" > README.md
  for i in $(seq 1 "$COUNT"); do git branch "hostile-$i" >/dev/null; done
  git tag hostile-tag
  run=${TERMORCH_RUN_ID}
  # Impersonates another task's branch and the run's integration branch.
  [ "$V" = b ] && git branch "termorch/$run/good1-x" && git branch "termorch/$run/integration"
  [ "$V" = c ] && git checkout -q -b "hostile-own" && git commit -qam "own commit"
  ;;
outside-allowed)
  mkdir -p src docs
  echo ok > src/ok.txt
  echo bad > docs/bad.txt
  ;;
outside-worktree)
  echo ok > inside.txt
  case $V in
  a) echo "hostile" >> "$main/README.md" ;;
  b) echo "hostile" > "$main/untracked-by-agent.txt" ;;
  # The run directory: forges another task's status and adds a line to the ledger.
  c)
    run_dir=$(cd "$TERMORCH_ARTIFACTS_DIR/../.." && pwd)
    echo '{"task_id":"good1","state":"failed"}' > "$run_dir/status/good1.failed" || :
    echo '{"forged":true}' >> "$run_dir/events.jsonl" || :
    echo "{}" > "$run_dir/execution_report.json" || :
    ;;
  esac
  ;;
stdin)
  record $$ agent
  case $V in
  a) read -r line; echo "read: ${line:-nothing}" ;;
  b) cat ;;
  # The controlling terminal, if it has one: the pane's.
  c) read -r line </dev/tty; echo "read from the terminal: ${line:-nothing}" ;;
  esac
  ;;
segv)
  echo "about to crash"
  if [ "$V" = b ]; then exec perl -e 'kill "SEGV", $$; sleep 5'; else kill -SEGV $$; fi
  ;;
forks)
  # Bounded: at most COUNT processes, and a per-process limit a little above what the user runs.
  n=$(ps -u "$(id -u)" --no-headers | wc -l)
  (
    ulimit -u $((n + COUNT)) 2>/dev/null
    i=0
    while [ $i -lt "$COUNT" ]; do
      sleep 600 &
      echo $! > "$pids/fork-$i" || break
      i=$((i + 1))
    done
    if [ "$V" = b ]; then (sleep 600 & echo $! > "$pids/nested"; wait) & fi
  ) 2>/dev/null
  echo "forked"
  [ "$V" = c ] && sleep 600
  ;;
canary)
  t=$API_TOKEN
  s=$DB_PASSWORD
  case $V in
  raw) echo "token: $t" ;;
  split)
    printf 'token: %s' "${t:0:$SPLIT}"
    sleep 0.1
    printf '%s' "${t:$SPLIT}"
    sleep 0.1
    printf ' and %s' "${s:0:$SPLIT}" >&2
    sleep 0.1
    printf '%s\n' "${s:$SPLIT}" >&2
    echo
    ;;
  nonl) printf 'token: %s' "$t" ;;
  stderr) printf 'token: %s\n' "$t" >&2 ;;
  json) node_out 'process.stdout.write(JSON.stringify({t: process.env.DB_PASSWORD, u: process.env.API_TOKEN}) + "\n" + JSON.stringify(process.env.DB_PASSWORD).replace(/[^\x20-\x7e]/g, c => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0")))' ;;
  url) node_out 'const s = process.env.DB_PASSWORD; process.stdout.write(`?a=${encodeURIComponent(s)}&b=${encodeURIComponent(s).toLowerCase()}\n${new URLSearchParams({s})}`)' ;;
  file)
    echo "the token is $t" > leak.txt
    printf '%s\n' "$s" > leak2.txt
    ;;
  artifact)
    echo "the token is $t" > "$TERMORCH_ARTIFACTS_DIR/leak.txt"
    echo "handoff: $t" > handoff.md
    ;;
  filename)
    echo "innocent" > "name-$t.txt"
    echo "innocent" > "$TERMORCH_ARTIFACTS_DIR/name-$t.txt"
    mkdir -p "$TERMORCH_ARTIFACTS_DIR/dir-$t"
    echo x > "$TERMORCH_ARTIFACTS_DIR/dir-$t/f"
    ;;
  bigartifact)
    # Larger than what is redacted in memory (64 MiB), the secret cut at a chunk's edge or not.
    { head -c "$SIZE" /dev/zero | tr '\0' 'a'; printf '\n%s\n' "$t"; head -c "$SIZE" /dev/zero | tr '\0' 'b'; printf '%s' "$t"; } > "$TERMORCH_ARTIFACTS_DIR/big.txt"
    ;;
  bigfile)
    { head -c "$SIZE" /dev/zero | tr '\0' 'a'; printf '%s\n' "$t"; } > big.txt
    ;;
  symlink)
    ln -s "/nowhere/$t" link-target
    ;;
  commitmsg)
    echo "changed" > README.md
    git commit -qam "leaking $t in a message"
    ;;
  branchonly)
    echo "changed" > README.md
    git branch "leak-$t"
    ;;
  branchname)
    echo "changed" > README.md
    git branch "leak-$t"
    git checkout -q -b "own-$t"
    ;;
  failing)
    echo "token: $t"
    printf 'fatal: %s\n' "$t" >&2
    exit 3
    ;;
  esac
  ;;
*)
  echo "unknown KIND $KIND" >&2
  exit 98
  ;;
esac
exit 0
