import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { execa, type ResultPromise } from "execa";
import { afterAll, afterEach } from "vitest";
import { Report } from "../../src/contract/report.js";
import {
  BIN,
  cliEnv,
  FAULTY_BIN,
  killServer,
  makeWorkspace,
  ROOT,
  STEP,
  uniqueSocket,
  waitFor,
} from "./harness.js";

/**
 * What a daemon test file sets up: its own tmux socket, daemon homes and workspaces (removed
 * after the file), and daemons that are SIGKILLed after each test if still running.
 */
export function daemonTestFile(tag: string) {
  const socket = uniqueSocket(tag);
  const cleanups: Array<() => void> = [];
  const daemons: ResultPromise[] = [];
  afterEach(async () => {
    for (const d of daemons.splice(0)) {
      d.kill("SIGKILL");
      await d.catch(() => {});
    }
  });
  afterAll(() => {
    killServer(socket);
    for (const c of cleanups) c();
  });

  const home = (): string => {
    const dir = mkdtempSync(join(tmpdir(), "termorch-home-"));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    return dir;
  };
  /** A daemon on home `h`; with `$TERMORCH_FAULT` in `env`, the CLI that injects that fault. */
  const startDaemon = (h: string, ...args: string[]): ResultPromise => startDaemonWith({}, h, ...args);
  const startDaemonWith = (env: Record<string, string>, h: string, ...args: string[]): ResultPromise => {
    const d = execa(
      process.execPath,
      [env.TERMORCH_FAULT ? FAULTY_BIN : BIN, "daemon", "--home", h, ...args],
      {
        reject: false,
        cwd: ROOT,
        env: cliEnv(socket, env),
      },
    );
    daemons.push(d);
    return d;
  };
  const logOf = (h: string): string => {
    const file = join(h, "logs", "termorch.log");
    return existsSync(file) ? readFileSync(file, "utf8") : "";
  };
  const ready = (h: string) =>
    waitFor(() => logOf(h).includes("watching the inbox"), 30_000, "the daemon to watch its inbox");
  /** A workspace repo, and an assignments body for the inbox whose workspace_dir points at it. */
  const job = (h: string, name: string, tasks: Array<Record<string, unknown>>) => {
    const ws = makeWorkspace();
    cleanups.push(ws.cleanup);
    const body: {
      run_id: string;
      tasks: Array<Record<string, unknown>>;
      environment: Record<string, unknown>;
      [key: string]: unknown;
    } = {
      run_id: name,
      tasks: tasks.map((t) => ({
        agent: "step",
        context_path: "ctx/task.md",
        command: ["bash", STEP],
        dependencies: [],
        // The step agent changes nothing unless told to WRITE: only then is a change its work.
        ...((t.env as Record<string, string> | undefined)?.WRITE === undefined
          ? { expect_changes: false }
          : {}),
        ...t,
      })),
      environment: { workspace_dir: ws.repo },
    };
    return {
      ws,
      body,
      drop: (file = `${name}.json`) => writeFileSync(join(h, "inbox", file), JSON.stringify(body)),
    };
  };
  const answer = (h: string, id: string) => join(h, "outbox", `${id}.json`);
  const readAnswer = (h: string, id: string) => Report.parse(JSON.parse(readFileSync(answer(h, id), "utf8")));
  return { socket, home, startDaemon, startDaemonWith, logOf, ready, job, answer, readAnswer };
}
