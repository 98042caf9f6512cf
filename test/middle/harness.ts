// The middle tier: the real pipeline (runAssignments, resumeRun) with a fake task runner and a
// workspace that is not a repository (or, for what needs one, a real repository in the temp
// folder), under vitest's fake timers. Files are real (a temp folder); no agent process is
// started and nothing sleeps.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { afterEach, beforeEach, vi } from "vitest";
import type { NotifyEvent } from "../../src/contract/notify.js";
import type { Report } from "../../src/contract/report.js";
import type { RunState } from "../../src/contract/state.js";
import type { NotifyDelivery } from "../../src/notify/notifier.js";
import {
  type DetachedResult,
  type DriveOptions,
  type RunResult,
  runAssignments,
} from "../../src/run/runner.js";
import type { TaskRun } from "../../src/task/task-run.js";
import type { TaskWorkspace } from "../../src/task/workspace.js";
import { type FakeAttempt, FakeHost, FakeRunner } from "./fake-runner.js";

const notUsed = (): never => {
  throw new Error("the middle tier's workspace is not a repository: no git operation may run");
};

/** A workspace that is not a git repository, found without running git. */
export const PLAIN_WORKSPACE: TaskWorkspace = {
  inspect: async () => null,
  prepare: notUsed,
  reset: notUsed,
  commit: notUsed,
  takeHead: notUsed,
  changedFiles: notUsed,
  changedEntries: notUsed,
  pendingChanges: notUsed,
  diffPatch: notUsed,
};

/** One line of a run's ledger, as the middle tests read it. */
export interface LedgerLine {
  type: string;
  task_id?: string;
  data: Record<string, unknown>;
}

export interface TaskSpec {
  id: string;
  dependencies?: string[];
  [key: string]: unknown;
}

/** A temp folder with a plain workspace `ws/`, an assignments file and a config file. */
export class MiddleRun {
  readonly dir = mkdtempSync(join(tmpdir(), "termorch-middle-"));
  readonly host = new FakeHost();
  readonly file = join(this.dir, "assignments.json");
  readonly configFile = join(this.dir, "config.json");
  /** The tasks as the run last told (onProgress). */
  private seen: readonly TaskRun[] | null = null;
  private readonly watchers: { check: (tasks: readonly TaskRun[]) => boolean; resolve: () => void }[] = [];

  /** The workspace is a git repository, and the run works through git (the review's copy of a task's work needs one). */
  readonly git: boolean;

  constructor(tasks: TaskSpec[], opts: { config?: object; assignment?: object; git?: boolean } = {}) {
    this.git = opts.git ?? false;
    mkdirSync(join(this.dir, "ws", "ctx"), { recursive: true });
    writeFileSync(join(this.dir, "ws", "ctx", "task.md"), "# the task\n");
    if (this.git) {
      const ws = join(this.dir, "ws");
      const git = (...args: string[]): void => {
        execFileSync("git", ["-c", "user.name=t", "-c", "user.email=t@t", ...args], {
          cwd: ws,
          stdio: "ignore",
        });
      };
      git("init", "-q", "-b", "main");
      git("add", "-A");
      git("commit", "-q", "-m", "start");
    }
    writeFileSync(
      this.file,
      JSON.stringify({
        run_id: "middle",
        tasks: tasks.map((t) => ({
          agent: "fake",
          context_path: "ctx/task.md",
          command: ["fake-agent", "{task_id}"],
          dependencies: [],
          ...t,
        })),
        environment: { workspace_dir: "ws" },
        ...opts.assignment,
      }),
    );
    // No warm pool: its lock is retried on a timer, which the fake clock holds.
    const git = this.git ? { git: { pool: { max_worktrees: 0, max_disk_mb: 1 } } } : {};
    writeFileSync(this.configFile, JSON.stringify({ ...git, ...opts.config }));
  }

  /** What runAssignments/resumeRun need besides the file: the fake runner, the plain workspace, a private registry. */
  /** The fake runner and workspace, this run's config and env; `extra`'s seams and hooks are merged in. */
  options(extra: DriveOptions = {}): DriveOptions & { configFile: string } {
    const { seams, hooks, ...rest } = extra;
    return {
      seams: {
        runner: new FakeRunner(this.host),
        ...(this.git ? {} : { workspace: PLAIN_WORKSPACE }),
        ...seams,
      },
      configFile: this.configFile,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        TERMORCH_CONFIG: "",
        TERMORCH_REGISTRY: join(this.dir, "registry"),
      },
      cwd: this.dir,
      hooks: {
        onProgress: (tasks) => {
          this.seen = tasks;
          for (const w of [...this.watchers]) {
            if (w.check(tasks)) {
              this.watchers.splice(this.watchers.indexOf(w), 1);
              w.resolve();
            }
          }
        },
        ...hooks,
      },
      ...rest,
    };
  }

  /** Resolves once a task change makes `check` true (its timers are armed by then). */
  until(check: (tasks: ReadonlyMap<string, TaskRun>) => boolean): Promise<void> {
    return new Promise((resolve) =>
      this.watchers.push({ check: (tasks) => check(new Map(tasks.map((t) => [t.id, t]))), resolve }),
    );
  }

  /** Resolves at once when the tasks as last seen make `check` true, else as `until` does. */
  when(check: (tasks: ReadonlyMap<string, TaskRun>) => boolean): Promise<void> {
    if (this.seen && check(new Map(this.seen.map((t) => [t.id, t])))) return Promise.resolve();
    return this.until(check);
  }

  /** Resolves once the task's attempt is launched and watched (its timeout armed). */
  running(taskId: string, attempt = 1): Promise<void> {
    return this.until((tasks) => {
      const t = tasks.get(taskId);
      return t?.state === "running" && t.attempts === attempt;
    });
  }

  /** Runs the file until `taskId` runs, then detaches (a daemon stopping): the run directory, for a resume. */
  async detachedAt(taskId: string): Promise<string> {
    const detach = new AbortController();
    const done = runAssignments({ assignmentsFile: this.file, ...this.options({ detach: detach.signal }) });
    await this.running(taskId);
    detach.abort();
    const result = await done;
    if (!("detached" in result)) throw new Error("the run did not detach");
    return result.runDir;
  }

  report(result: RunResult | DetachedResult): Report {
    if ("detached" in result) throw new Error("the run detached: no report");
    return result.report;
  }

  /**
   * Runs the file to its report, each attempt doing `act`, with the stand-in preset CLIs first on
   * PATH (a preset's CLI must be there to pass validation; the fake runner runs none of them).
   */
  async reportWithPresets(act: (attempt: FakeAttempt) => void, extra: DriveOptions = {}): Promise<Report> {
    this.host.onLaunch = act;
    const options = this.options(extra);
    const path = `${join(import.meta.dirname, "..", "fixtures", "agents")}${delimiter}${process.env.PATH}`;
    return this.report(
      await runAssignments({ assignmentsFile: this.file, ...options, env: { ...options.env, PATH: path } }),
    );
  }

  /** The run's ledger (events.jsonl), parsed, in order. */
  events(runDir: string = this.dir): LedgerLine[] {
    return readFileSync(join(runDir, "events.jsonl"), "utf8")
      .split("\n")
      .filter(Boolean)
      .map((line) => JSON.parse(line) as LedgerLine);
  }

  state(runDir: string): RunState {
    return JSON.parse(readFileSync(join(runDir, "state.json"), "utf8")) as RunState;
  }

  cleanup(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * What every middle-tier file sets up: fake timers around each test, and the test's MiddleRun
 * (`current()`) removed after it. Everything takes milliseconds (a second with git), so a test that
 * waits longer than its timeout is waiting for an exit that never comes.
 */
export function middleTier(current: () => MiddleRun | undefined): void {
  // A bound on a hang, not a timing: tests of a git workspace (git: true) run real git, which a
  // loaded machine (the whole suite on two cores) slows by several times.
  vi.setConfig({ testTimeout: 15_000 });
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ["setTimeout", "clearTimeout", "Date"] });
  });
  afterEach(() => {
    vi.useRealTimers();
    current()?.cleanup();
  });
}

/** A notify delivery that keeps every event it is given (DriveOptions.seams.notify), for a test to read. */
export function notifyRecorder(): { sent: NotifyEvent[]; seams: { notify: NotifyDelivery } } {
  const sent: NotifyEvent[] = [];
  return {
    sent,
    seams: {
      notify: async (event) => {
        sent.push(event);
        return null;
      },
    },
  };
}
