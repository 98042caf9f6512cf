import type { Command } from "commander";
import { InputError } from "../errors.js";
import { decide } from "../ops/approval.js";
import { sendInputOf, sendToTask } from "../ops/interactive.js";
import { RunFeed, runScope } from "../ops/run-feed.js";
import { isLoopback } from "../serve/auth.js";
import { Dashboard } from "../serve/server.js";
import { TerminalPool } from "../serve/terminal.js";
import { runTimeline } from "../serve/timeline.js";
import type { Io } from "./io.js";
import { address, listenFailure, port, untilStopped } from "./listen-options.js";
import { stopSignal } from "./stop-signal.js";

/**
 * `termorch serve`: the local web dashboard (docs/guides/operators.md: termorch serve). It listens on 127.0.0.1
 * unless `--host` says otherwise, prints its URL with the access token on stdout, and runs until
 * SIGINT (exit 130, as `logs --follow` does) or SIGTERM (exit 0, as the daemon does: a service
 * manager's stop is its normal end).
 */
export function registerServeCommand(program: Command, io: Io, setCode: (code: number) => void): void {
  program
    .command("serve")
    .description(
      "a local web dashboard: runs and tasks live, each run's timeline, a live read-only terminal of any running task, and answers to tasks waiting for input",
    )
    .argument("[run]", "a run directory or run id (default: every registered run)")
    .option("--home <dir>", "show the runs of a daemon home (<dir>/runs/*/)")
    .option("--port <n>", "port to listen on (default: 0, a free one)", port, 0)
    .option(
      "--host <addr>",
      "address to listen on (default 127.0.0.1; any other makes the dashboard reachable from elsewhere)",
      address,
      "127.0.0.1",
    )
    .action(async (ref: string | undefined, o: { home?: string; port: number; host: string }) => {
      if (ref !== undefined && o.home !== undefined)
        throw new InputError(
          [{ message: "pass either a run or --home, not both" }],
          "termorch serve [--home DIR | <run-dir>] [--port N]",
        );
      setCode(await serve(ref, o, io));
    });
}

async function serve(
  ref: string | undefined,
  o: { home?: string; port: number; host: string },
  io: Io,
): Promise<number> {
  if (o.host !== "127.0.0.1")
    io.stderr.write(
      isLoopback(o.host)
        ? `termorch: warning: serving on ${o.host}, not 127.0.0.1\n`
        : `termorch: warning: serving on ${o.host}: other machines can reach this dashboard; anyone with its URL (token included) sees every task's terminal and can answer a task waiting for input, or approve and reject what waits for a person. Prefer the default and an SSH tunnel.\n`,
    );
  const feed = await RunFeed.open(runScope(ref, o.home, io.cwd), { env: io.env, cwd: io.cwd });
  const terminals = new TerminalPool(io.env);
  let dashboard: Dashboard;
  try {
    dashboard = await Dashboard.start({
      feed,
      terminals,
      host: o.host,
      port: o.port,
      timeline: runTimeline,
      // The run by its folder: a run id may name runs of two workspaces.
      send: async (run, taskId, answer) => {
        await sendToTask(taskId, run.run_dir, sendInputOf(taskId, answer), { env: io.env, cwd: io.cwd });
      },
      decide: async (run, taskId, deciding) => {
        await decide(run.run_dir, taskId, deciding, { env: io.env, cwd: io.cwd, now: Date.now() });
      },
    });
  } catch (error) {
    await feed.close();
    throw listenFailure(error, o.host, o.port);
  }
  // Only prints its URL: a reader of stdout that goes away (`| head -1`) does not stop it.
  const stop = stopSignal(io, { readerGone: false });
  try {
    io.stdout.write(`${dashboard.url}\n`);
    io.stderr.write(
      `termorch serve: dashboard at the URL above (it holds the access token); Ctrl-C stops it\n${
        isLoopback(o.host)
          ? `  from another machine: ssh -L 8080:${o.host.includes(":") ? `[${o.host}]` : o.host}:${dashboard.port} <this host>, then open http://127.0.0.1:8080/?token=${dashboard.token}\n`
          : ""
      }`,
    );
    return await untilStopped(stop);
  } finally {
    stop.dispose();
    await dashboard.close();
    await feed.close();
  }
}
