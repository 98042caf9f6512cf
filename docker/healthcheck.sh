#!/bin/sh
# The image's HEALTHCHECK: healthy (exit 0) when the termorch the entrypoint started is alive and,
# for a worker, its heartbeat is fresh. It reads what the entrypoint recorded in TERMORCH_ROLE_FILE
# (role=, pid=, dir=), as the healthcheck runs apart from that process and cannot see its arguments.
#
#   daemon   its process is alive (its pid is still a termorch daemon) and it keeps <home>/logs/termorch.log
#   worker   its process is alive and <workdir>/worker.json's seen_at (ms since the epoch, rewritten
#            every ~5 s) is younger than TERMORCH_HEALTH_MAX_AGE_S (default 30) seconds
#
# Unhealthy exits 1 with one line saying why (docker inspect shows it).
set -eu

fail() {
  printf 'unhealthy: %s\n' "$*"
  exit 1
}

file=${TERMORCH_ROLE_FILE:-/run/termorch/role}
[ -r "$file" ] || fail "no $file: termorch was not started by the entrypoint (daemon or worker), or has not started yet"
role=''
pid=''
dir=''
while IFS='=' read -r key value; do
  case $key in
    role) role=$value ;;
    pid) pid=$value ;;
    dir) dir=$value ;;
  esac
done <"$file"
case $pid in
  '' | *[!0-9]*) fail "$file has no pid" ;;
esac
[ -n "$dir" ] || fail "$file names no folder"

# The pid must still be termorch in that role: after a restart of its container a pid can be reused.
[ -r "/proc/$pid/cmdline" ] || fail "termorch $role (pid $pid) is not running"
cmdline=$(tr '\0' ' ' <"/proc/$pid/cmdline")
case " $cmdline " in
  *" $role "*) ;;
  *) fail "pid $pid is no longer termorch $role (it runs: $cmdline)" ;;
esac

case $role in
  daemon)
    [ -f "$dir/logs/termorch.log" ] || fail "the daemon (pid $pid) has no log at $dir/logs/termorch.log"
    ;;
  worker)
    beat="$dir/worker.json"
    [ -f "$beat" ] || fail "the worker (pid $pid) has written no heartbeat at $beat"
    # JSON is read by node, which the image has anyway, rather than by patterns over its text.
    # shellcheck disable=SC2016 # the script is JavaScript, its ${} are node's
    node -e '
      const [file, maxS] = process.argv.slice(1);
      let seen;
      try {
        seen = JSON.parse(require("node:fs").readFileSync(file, "utf8")).seen_at;
      } catch (e) {
        console.log(`unhealthy: ${file} is not JSON (${e.message})`);
        process.exit(1);
      }
      if (typeof seen !== "number" || !Number.isFinite(seen)) {
        console.log(`unhealthy: ${file} has no seen_at (ms since the epoch)`);
        process.exit(1);
      }
      const age = (Date.now() - seen) / 1000;
      if (age > Number(maxS)) {
        console.log(`unhealthy: the worker last wrote ${file} ${Math.round(age)} s ago (more than ${maxS} s)`);
        process.exit(1);
      }
    ' "$beat" "${TERMORCH_HEALTH_MAX_AGE_S:-30}"
    ;;
  *)
    fail "$file names role \"$role\": expected daemon or worker"
    ;;
esac
printf 'healthy: termorch %s (pid %s)\n' "$role" "$pid"
