import { existsSync } from "node:fs";
import { lstat, mkdir, readdir, readFile, stat } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import chokidar, { type FSWatcher } from "chokidar";
import PQueue from "p-queue";
import type { Logger } from "pino";
import { z } from "zod";
import { LockedError } from "../errors.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { jsonText, NotRegularFile, readRegularFile } from "../input/json-file.js";
import type { BackendChoice } from "../run/backend.js";
import { writeErrorReport } from "../run/report-file.js";
import {
  type DetachedResult,
  type DriveOptions,
  internalError,
  type RunResult,
  type RunSeams,
  readState,
  resumeRun,
  runAssignments,
} from "../run/runner.js";
import { type Claim, claim, isCandidate, readClaim } from "./claim.js";

export interface DaemonOptions {
  home: string;
  configFile?: string;
  /** A crash-test fault for every run (src/run/faults.ts): injected by tests only. */
  fault?: string;
  /** Runs driven at once (default: unlimited; the task limit is what bounds work). */
  maxRuns?: number;
  /** Tasks running at once across all runs (host-wide). */
  maxParallel?: number;
  /** Scale-out (--backend/--redis): every run's tasks go to workers; one connection serves all runs. */
  backend?: BackendChoice;
  env: Readonly<Record<string, string | undefined>>;
  log: Logger;
  /** How long an inbox file's size must stay unchanged before it is taken. */
  stableMs?: number;
  /** Where every run's attempts run, and its workspace's git side; default: tmux and git. Tests inject fakes. */
  drive?: Pick<RunSeams, "runner" | "workspace">;
}

/** How long an unparseable inbox file must stay untouched before it is taken as invalid. */
const SETTLE_MS = 5000;
/** How often the inbox is looked at for symlinks the watcher cannot see. */
const BROKEN_LINKS_MS = 2000;

/** The daemon's folders under its home. */
export function homeLayout(home: string) {
  const root = resolve(home);
  return {
    root,
    inbox: join(root, "inbox"),
    runs: join(root, "runs"),
    outbox: join(root, "outbox"),
    logs: join(root, "logs"),
  };
}

/**
 * `termorch daemon`: takes assignment files from `<home>/inbox/`, runs several runs at once
 * under one host-wide task limit, and answers each in `<home>/outbox/<run_id>.json`. On start
 * it first finishes whatever an earlier daemon left unfinished. Stopping detaches: agents keep
 * running in tmux and the next start re-adopts them.
 */
export class Daemon {
  private readonly layout: ReturnType<typeof homeLayout>;
  private readonly runs: PQueue;
  private readonly hostQueue: PQueue;
  /** Runs being driven whose answer onReport already wrote (forgotten once the run returns). */
  private readonly answered = new Set<string>();
  private readonly detach = new AbortController();
  private readonly active = new Set<Promise<void>>();
  private readonly seen = new Set<string>();
  private watcher: FSWatcher | null = null;
  private stopping = false;
  private brokenLinks: NodeJS.Timeout | null = null;

  constructor(private readonly opts: DaemonOptions) {
    this.layout = homeLayout(opts.home);
    this.runs = new PQueue({ concurrency: opts.maxRuns ?? Number.POSITIVE_INFINITY });
    this.hostQueue = new PQueue({ concurrency: opts.maxParallel ?? Number.POSITIVE_INFINITY });
  }

  async start(): Promise<void> {
    const { inbox, runs, outbox, logs } = this.layout;
    for (const dir of [inbox, runs, outbox, logs]) await mkdir(dir, { recursive: true });
    // The logger's base already carries the pid.
    this.opts.log.info({ home: this.layout.root }, "daemon starting");
    await this.recover();
    const stableMs = this.opts.stableMs ?? 300;
    this.watcher = chokidar.watch(inbox, {
      depth: 0,
      ignoreInitial: false,
      // A file without read permission is an inbox file too: taken and answered (the run says it
      // cannot read it), not left unseen for good.
      ignorePermissionErrors: true,
      // A file is taken once its size stopped changing; a writer that renames a finished
      // file into place is seen as one complete add.
      awaitWriteFinish: { stabilityThreshold: stableMs, pollInterval: Math.min(50, stableMs) },
      ignored: (path, stats) =>
        path !== inbox &&
        (stats?.isDirectory() === true || !isCandidate(path.slice(path.lastIndexOf("/") + 1))),
    });
    this.watcher.on("add", (path) => this.take(path));
    this.watcher.on("error", (error) => this.opts.log.error({ err: String(error) }, "inbox watcher error"));
    await new Promise<void>((ready) => this.watcher!.once("ready", () => ready()));
    this.opts.log.info({ inbox }, "watching the inbox");
    await this.takeBrokenLinks();
    this.brokenLinks = setInterval(() => void this.takeBrokenLinks(), BROKEN_LINKS_MS);
    this.brokenLinks.unref();
  }

  /** Stop claiming, leave running agents to tmux, persist, and return once every run let go. */
  async stop(): Promise<void> {
    if (this.stopping) return;
    this.stopping = true;
    this.opts.log.info("daemon stopping: runs detach, agents keep running");
    if (this.brokenLinks) clearInterval(this.brokenLinks);
    await this.watcher?.close();
    this.detach.abort();
    await Promise.allSettled([...this.active]);
    this.opts.log.info("daemon stopped");
  }

  /** Resolves when no run is being driven and none is queued. */
  async idle(): Promise<void> {
    while (this.active.size > 0) await Promise.allSettled([...this.active]);
  }

  /**
   * The watcher never reports a symlink it cannot follow (dangling, or a loop): such a file is
   * looked for here, taken like any other and answered (the run finds nothing to read).
   */
  private async takeBrokenLinks(): Promise<void> {
    const names = await readdir(this.layout.inbox).catch(() => [] as string[]);
    for (const name of names.filter(isCandidate)) {
      const path = join(this.layout.inbox, name);
      const link = await lstat(path).catch(() => null);
      if (link?.isSymbolicLink() && !(await stat(path).catch(() => null))) this.take(path);
    }
  }

  private take(path: string): void {
    if (this.stopping || this.seen.has(path)) return;
    this.seen.add(path);
    const work = (async () => {
      try {
        await this.settle(path);
        const claimed = await claim(path, this.layout.runs);
        if (!claimed) return; // Another daemon took it.
        this.opts.log.info({ run: claimed.runId, source: claimed.source }, "claimed");
        await this.drive(claimed.runId, () => this.runFresh(claimed));
      } catch (error) {
        this.opts.log.error({ file: path, err: String(error) }, "could not take an inbox file");
      } finally {
        this.seen.delete(path);
      }
    })();
    this.track(work);
  }

  /**
   * A size-stable file can still be a slow writer's half: while it does not parse and was
   * modified within the last few seconds, wait for it; after that it is taken as it is (and
   * answered as invalid if it still does not parse).
   */
  private async settle(path: string): Promise<void> {
    for (;;) {
      try {
        const text = jsonText(await readRegularFile(path));
        // Not UTF-8 may be a writer stopped mid-character: waited for like a half-written file.
        if (typeof text !== "string") throw new Error(text.problem);
        JSON.parse(text);
        return;
      } catch (error) {
        // A FIFO, a device, a broken symlink is no writer's half: taken at once, and refused by the run.
        if (error instanceof NotRegularFile || (error as NodeJS.ErrnoException).code) return;
        const age = Date.now() - (await lstat(path)).mtimeMs;
        if (age > SETTLE_MS || this.stopping) return;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  private runFresh(c: Claim): Promise<RunResult | DetachedResult> {
    return runAssignments({
      assignmentsFile: c.file,
      outDir: c.runDir,
      baseDir: dirname(c.source),
      runId: c.runId,
      ...(this.opts.configFile ? { configFile: this.opts.configFile } : {}),
      ...this.driveOptions(c.runId),
    });
  }

  /**
   * What every run of this daemon shares: queue behind locks, detach on stop, the host-wide
   * limit; and the answer, given as soon as the report is written.
   */
  private driveOptions(runId: string): DriveOptions {
    return {
      hooks: {
        onReport: async (result) => {
          await this.answer(runId, result.report);
          this.answered.add(runId);
        },
      },
      seams: { ...(this.opts.fault ? { fault: this.opts.fault } : {}), ...this.opts.drive },
      ...(this.opts.backend ? { backend: this.opts.backend } : {}),
      wait: true,
      detach: this.detach.signal,
      hostQueue: this.hostQueue,
      env: this.opts.env,
      cwd: this.layout.root,
      logger: this.opts.log,
    };
  }

  /** Drives one run through the run queue and answers it in the outbox. One bad run never stops the others. */
  private async drive(runId: string, start: () => Promise<RunResult | DetachedResult>): Promise<void> {
    // No abort signal for p-queue: it would reject a run that is already running at once, so the
    // log would call it queued and stop() would return before the run had detached.
    await this.runs.add(async () => {
      let answeredByReport = false;
      if (this.stopping) {
        this.opts.log.info({ run: runId }, "run left queued; it starts on the next start");
        return;
      }
      try {
        const result = await start().finally(() => {
          // Whatever happens next, nothing about this run is kept: a long-running daemon's
          // memory must not grow with the runs it answered.
          answeredByReport = this.answered.delete(runId);
        });
        if ("detached" in result) {
          this.opts.log.info(
            { run: runId },
            "run detached: its agents keep running, the next start resumes it",
          );
          return;
        }
        // Answered by onReport already, unless the run ended before it had a report of its own.
        if (!answeredByReport) await this.answer(runId, result.report);
        this.opts.log.info(
          { run: runId, exit_code: result.exitCode, completed: result.report.summary.completed },
          "run finished",
        );
      } catch (error) {
        if (this.stopping && error instanceof LockedError) {
          this.opts.log.info(
            { run: runId },
            "run left waiting for its workspace lock; it starts on the next start",
          );
          return;
        }
        this.opts.log.error({ run: runId, err: String(error) }, "run failed to complete");
        // Every run gets an answer, a failed one too (unless it is left for the next start).
        if (!this.stopping && !(error instanceof LockedError)) await this.answerFailure(runId, error);
      }
    });
  }

  private async answerFailure(runId: string, error: unknown): Promise<void> {
    try {
      const dir = join(this.layout.runs, runId);
      // A report the run wrote itself (another daemon finished it) is the answer; never overwrite it.
      const existing = join(dir, "execution_report.json");
      if (await reportOf(existing, runId)) {
        await this.answer(runId, JSON.parse(await readFile(existing, "utf8")));
        return;
      }
      const { report } = await writeErrorReport(dir, Date.now(), internalError(error), {
        own: true,
        runId,
      });
      await this.answer(runId, report);
    } catch (failure) {
      this.opts.log.error({ run: runId, err: String(failure) }, "could not answer a failed run");
    }
  }

  private async answer(runId: string, report: unknown): Promise<void> {
    await writeJsonAtomic(join(this.layout.outbox, `${runId}.json`), report);
  }

  /** On start: finish runs an earlier daemon left, and answer reports it wrote but did not deliver. */
  private async recover(): Promise<void> {
    const names = await readdir(this.layout.runs).catch(() => [] as string[]);
    for (const runId of names.sort()) {
      const dir = join(this.layout.runs, runId);
      const reportPath = join(dir, "execution_report.json");
      const statePath = join(dir, "state.json");
      const outbox = join(this.layout.outbox, `${runId}.json`);
      try {
        if (existsSync(statePath)) {
          const state = await readState(dir);
          // A report beside a running state is a driver that died before it recorded the end
          // (or left the target's move unfinished): the resume finishes it and reports again.
          if (state.phase === "running") {
            this.opts.log.info({ run: runId }, "resuming an unfinished run");
            this.track(this.drive(runId, () => resumeRun({ runDir: dir, ...this.driveOptions(runId) })));
            continue;
          }
        } else if (!existsSync(reportPath) && existsSync(join(dir, "assignments.json"))) {
          // Claimed, but the daemon died before the run started (claim.json may be missing: it
          // is written after the file was moved in, and is then read as damaged).
          const claimed = await readClaim(dir);
          // Only the inbox file's folder matters (workspace_dir is relative to it), and the inbox
          // is watched without subfolders: a damaged record is as good as this home's inbox.
          if ("problem" in claimed)
            this.opts.log.warn(
              { run: runId, err: claimed.problem },
              "damaged claim record; workspace_dir is taken as relative to the inbox",
            );
          const source = "problem" in claimed ? join(this.layout.inbox, `${runId}.json`) : claimed.source;
          this.opts.log.info({ run: runId }, "starting a run claimed before a crash");
          this.track(
            this.drive(runId, () =>
              this.runFresh({ runId, runDir: dir, file: join(dir, "assignments.json"), source }),
            ),
          );
          continue;
        }
        const report = existsSync(reportPath) ? await readFile(reportPath, "utf8") : null;
        if (report && !existsSync(outbox)) await this.answer(runId, JSON.parse(report));
      } catch (error) {
        this.opts.log.error({ run: runId, err: String(error) }, "could not recover a run");
      }
    }
  }

  private track(work: Promise<void>): void {
    this.active.add(work);
    void work.finally(() => this.active.delete(work));
  }
}

/** Only the run id is looked at: a report of another termorch version still counts as written. */
const ReportRunId = z.object({ run_id: z.string().nullable() });

async function reportOf(path: string, runId: string): Promise<boolean> {
  try {
    return ReportRunId.safeParse(JSON.parse(await readFile(path, "utf8"))).data?.run_id === runId;
  } catch {
    return false;
  }
}
