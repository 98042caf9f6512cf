import type { Command } from "commander";
import { ExitCode, InputError } from "../errors.js";
import { RunFeed, runScope } from "../ops/run-feed.js";
import type { Io } from "./io.js";
import { stopSignal } from "./stop-signal.js";

const HELP = `
On a terminal: a full-screen dashboard of every run in scope and its tasks (state, wave,
attempts, elapsed time, waiting for input, cost where the agent's CLI reports it, last log
line), redrawn as their files change. Keys:
  up/down, j/k   select a task (PgUp/PgDn, g/G: page, first, last)
  enter          attach to the task's tmux session; detach (C-b d) comes back here
                 (inside your own tmux: a nested client, detach with C-b C-b d)
  l              page the task's stdout log with $PAGER (default: less -R); quit it to come back
  c              cancel the selected task's run, after a y/n question (as termorch cancel)
  q, Ctrl-C      quit (exit 0; 130 after Ctrl-C, SIGINT, SIGTERM or SIGHUP)
Plain keys only, no mouse: it works over SSH. NO_COLOR (set, non-empty) turns colours off.

When stdout (or stdin) is not a terminal, it prints plain lines instead, no escapes:
  <time> <run-id> <task> <state> wave <n> attempt <k>[ reason <r>][ exit <code>][ needs_human]
one when the watch starts for every task, then one each time a task's state or attempt
changes (<state>: pending, running, redo, waiting (for input), success, failed, skipped; <time>:
when it happened; the view is recomputed at most every 0.15 s, so a task that starts and
ends within that may show only its end), and
  <time> <run-id> - reported exit <code>      or    <time> <run-id> - interrupted (...)
once a run is finished, or its driver is gone (with --home, <time> <run-id> - queued for a
run the daemon claimed and has not started). It exits 0 once every run in scope is reported
or interrupted and none is queued (at once when there is none), or 130 on SIGINT, SIGTERM
or SIGHUP.
`;

/** `termorch watch`: the live dashboard (src/watch/), or plain lines when not on a terminal. */
export function registerWatchCommand(program: Command, io: Io, setCode: (code: number) => void): void {
  program
    .command("watch")
    .description("a live full-screen dashboard of runs and tasks (plain lines when not on a terminal)")
    .argument("[run]", "a run directory or run id (default: every registered run)")
    .option("--home <dir>", "watch the runs of a daemon home (<dir>/runs/*/)")
    .addHelpText("after", HELP)
    .action(async (ref: string | undefined, o: { home?: string }) => {
      if (ref !== undefined && o.home !== undefined)
        throw new InputError(
          [{ message: "pass either a run or --home, not both" }],
          "termorch watch [--home DIR | <run-dir|run-id>]",
        );
      const scope = runScope(ref, o.home, io.cwd);
      const feed = await RunFeed.open(scope, { env: io.env, cwd: io.cwd });
      try {
        // The dashboard draws on the process's own terminal and reads its keys, whatever io says.
        if (io.stdout.isTTY && process.stdout.isTTY && process.stdin.isTTY) {
          const { runDashboard } = await import("../watch/dashboard.js");
          setCode(
            await runDashboard({
              feed,
              env: io.env,
              cwd: io.cwd,
              scope: scope.kind === "run" ? ref! : scope.kind === "home" ? `home ${o.home}` : "all runs",
              color: !io.env.NO_COLOR,
              stdin: process.stdin,
              stdout: process.stdout,
              stderr: process.stderr,
            }),
          );
          return;
        }
        const stop = stopSignal(io, { readerGone: true });
        try {
          const { plainWatch } = await import("../watch/plain.js");
          const end = await plainWatch(feed, (line) => io.stdout.write(`${line}\n`), stop.signal);
          setCode(end === "done" || stop.cause() === "reader-gone" ? ExitCode.ok : ExitCode.interrupted);
        } finally {
          stop.dispose();
        }
      } finally {
        await feed.close();
      }
    });
}
