import { type FSWatcher as DirWatcher, existsSync, readdirSync, watch } from "node:fs";
import { mkdir } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import chokidar, { type FSWatcher } from "chokidar";
import type { RunState } from "../contract/state.js";
import type { QueuedRunView, RunView, StatusView } from "../contract/status-view.js";
import { ensureUserDir, registryDir, registryInUserDir } from "../fs/names.js";
import { JournalReaders } from "../fs/run-state-file.js";
import { homeQueued, homeRuns, type OpsRun, readRunState, registryRuns, resolveRun } from "./runs.js";
import { type SessionInfo, sessionsBySocket } from "./sessions.js";
import { statusView } from "./status.js";

type Env = Readonly<Record<string, string | undefined>>;

/** Which runs a view shows: every registered run, a daemon home's runs, or one run. */
export type RunScope = { kind: "registry" } | { kind: "home"; home: string } | { kind: "run"; ref: string };

/** The scope of what the operator typed: a run, `--home DIR` (not both), or neither. */
export function runScope(ref: string | undefined, home: string | undefined, cwd: string): RunScope {
  if (ref !== undefined) return { kind: "run", ref };
  if (home !== undefined) return { kind: "home", home: resolve(cwd, home) };
  return { kind: "registry" };
}

/** The runs of a scope, as `termorch status` lists them (oldest first). */
export async function scopeRuns(scope: RunScope, env: Env, cwd: string): Promise<OpsRun[]> {
  if (scope.kind === "run") return [await resolveRun(scope.ref, env, cwd)];
  if (scope.kind === "home") return homeRuns(scope.home, env);
  return registryRuns(env);
}

/** The scope's claimed runs that have not started: only a daemon home has them. */
export async function scopeQueued(scope: RunScope): Promise<QueuedRunView[]> {
  return scope.kind === "home" ? homeQueued(scope.home) : [];
}

/** `termorch status --json`: the status document of a scope's runs. */
export async function scopeStatus(scope: RunScope, env: Env, cwd: string): Promise<StatusView> {
  const runs = await scopeRuns(scope, env, cwd);
  const sessions = await sessionsBySocket(
    runs.flatMap((r) => (r.state ? [r.state.socket] : [])),
    env,
  );
  return {
    ...(await statusView(runs, (s) => sessions.get(s) ?? new Map(), Date.now())),
    queued: await scopeQueued(scope),
  };
}

/**
 * What changes in a run directory that a view shows; everything else there (artifacts, a
 * workspace, the temp copies of atomic writes, the ledger: a view shows nothing of it, and the
 * driver appends to it at every step) is not looked at. The run folder, its status/ and its
 * logs/ each have a plain directory watch (see `watchRun`).
 */
const RUN_FILES = new Set(["state.json", "execution_report.json", "status", "claim.json"]);
/**
 * Changes after which the run's state is read again (state.json with its task journal): a task's
 * change of state writes its status file, and the driver writes state.json at its start and end.
 * The ledger and the logs change far more often and change nothing of the state.
 */
const STATE_FILES = new Set(["state.json", "status", "claim.json"]);
/**
 * Changes that can start or end a task's session: a launch and an end each write a status file
 * (and the run folder's `status` entry appears with the first); the panes are listed again then.
 * A session that vanished on its own is the sweep's.
 */
const SESSION_FILES = new Set(["status"]);

export interface RunFeedOptions {
  env: Env;
  cwd: string;
  /** Recomputes at most this often while files change. */
  throttleMs?: number;
  /**
   * Recomputes at most this often while only logs change: a chatty agent appends to its log a
   * hundred times a second, and views that follow it at `throttleMs` cost more CPU than the run's
   * driver (BENCHMARKS.md, "Operators' views"). Any other change brings a held-back view forward.
   */
  logThrottleMs?: number;
  /**
   * A driver killed with SIGKILL, or a tmux session that vanished, writes no file: while a run
   * shows as running, the view is also recomputed this often so that it turns `interrupted`.
   */
  sweepMs?: number;
  /**
   * Lists the tmux servers' sessions at most this often while tasks start and end: each listing
   * spawns a tmux client (3.4 ms of CPU with this process's own share), and short tasks made it
   * a third of the feed's CPU. A view between two listings shows the state at once; the sessions
   * it shows follow within this.
   */
  sessionsMs?: number;
  now?: () => number;
}

/**
 * The live view behind `termorch watch` and `termorch serve`: the StatusView of a scope,
 * recomputed when the files behind it change (file watches on the registry or the daemon home,
 * and on each run's state.json, status/, logs/, ledger and report), never from a polling loop
 * over the data. Listeners get every new view; errors while recomputing keep the last view.
 */
export class RunFeed {
  private view: StatusView;
  private readonly listeners = new Set<(view: StatusView) => void>();
  private readonly watcher: FSWatcher;
  private readonly watchedRuns = new Set<string>();
  /** The run folders the current view shows (a change elsewhere, a new run's, reads the scope again). */
  private inView = new Set<string>();
  /** Each watched run's plain directory watches: the folder itself, status/ and logs/. */
  private readonly runWatchers = new Map<string, Map<"run" | "status" | "logs", DirWatcher>>();
  /** The runs whose logs/ watch is closed until the next view begins (see `watchRun`). */
  private readonly logsPaused = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  /** When `timer` fires. */
  private due = 0;
  private sweep: NodeJS.Timeout | null = null;
  /** The view that lists the sessions again once it may (see `spaceSessions`). */
  private sessionsLater: NodeJS.Timeout | null = null;
  private computing: Promise<void> | null = null;
  private again = false;
  private closed = false;
  private lastRun = 0;
  /** What the next view may take from this one (null: read everything again). */
  private kept: Kept | null;
  /** What changed since the last view began: the runs whose files did, and whether only logs did. */
  private since: Changes = noChanges();

  private constructor(
    readonly scope: RunScope,
    private readonly options: Required<Omit<RunFeedOptions, "now">> & { now: () => number },
    first: { view: StatusView; kept: Kept },
  ) {
    this.view = first.view;
    this.kept = first.kept;
    this.watcher = chokidar.watch([], {
      ignoreInitial: true,
      ignored: (path) => this.ignored(path),
    });
    // The registry's or the daemon home's folder: runs come and go.
    this.watcher.on("all", () => this.changed({ run: "all", logsOnly: false, sessions: true }));
    this.watcher.on("error", () => this.changed({ run: "all", logsOnly: false, sessions: true }));
    const root = this.rootDir();
    if (root) this.watcher.add(root);
    this.follow(first.view);
  }

  /** Computes the first view (bad input, e.g. an unknown run, throws here) and starts watching. */
  static async open(scope: RunScope, options: RunFeedOptions): Promise<RunFeed> {
    const full = {
      throttleMs: options.throttleMs ?? 150,
      logThrottleMs: options.logThrottleMs ?? 500,
      sweepMs: options.sweepMs ?? 5_000,
      sessionsMs: options.sessionsMs ?? 1000,
      env: options.env,
      cwd: options.cwd,
      now: options.now ?? Date.now,
    };
    const first = await compute(scope, full.env, full.cwd, full.now(), null, noChanges());
    // Watching the registry before the first run registers needs its folder (termorch's own, private).
    if (scope.kind === "registry") {
      if (registryInUserDir(full.env)) await ensureUserDir();
      await mkdir(registryDir(full.env), { recursive: true, mode: 0o700 });
    }
    const feed = new RunFeed(scope, full, first);
    await feed.watching();
    return feed;
  }

  /**
   * Waits for the watches to be in place (chokidar scans the folders first; bounded, so a slow
   * disk cannot hold a view back), then reads the view again: a file written between the first
   * view and then raised no event, and the view would miss it until some later change.
   */
  private async watching(): Promise<void> {
    // One run's scope gives chokidar no folder, and it never says ready for none: `watch <run>`
    // printed nothing for 5 s, and a short redo was over before its first line.
    if (this.rootDir() !== null)
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 5_000);
        this.watcher.once("ready", () => {
          clearTimeout(timer);
          resolve();
        });
      });
    this.kept = null;
    await this.recompute();
  }

  current(): StatusView {
    return this.view;
  }

  /** Calls `listener` with each new view; returns the function that stops it. */
  subscribe(listener: (view: StatusView) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Recomputes now (after an operator's action, e.g. a cancel), every run read again. */
  refresh(): void {
    this.kept = null;
    this.changed({ run: "all", logsOnly: false, sessions: true });
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.sweep) clearTimeout(this.sweep);
    if (this.sessionsLater) clearTimeout(this.sessionsLater);
    this.listeners.clear();
    for (const watchers of this.runWatchers.values()) for (const w of watchers.values()) w.close();
    this.runWatchers.clear();
    await this.watcher.close();
    await this.computing;
  }

  /** The folder whose entries are the scope's runs: new runs show up as they appear there. */
  private rootDir(): string | null {
    if (this.scope.kind === "home") return join(this.scope.home, "runs");
    if (this.scope.kind === "registry") return registryDir(this.options.env);
    return null;
  }

  /** Only the scope's folder and its entries (the registry's files, a daemon home's run folders). */
  private ignored(path: string): boolean {
    const root = this.rootDir();
    return !(root !== null && (path === root || dirname(path) === root));
  }

  private follow(view: StatusView): void {
    const dirs = [...view.runs.map((r) => r.run_dir), ...view.problems.flatMap((p) => p.run_dir ?? [])];
    this.inView = new Set(view.runs.map((r) => r.run_dir));
    // A daemon home's run folders too, as they appear: a new run's files are seen from its start.
    const root = this.rootDir();
    if (this.scope.kind === "home" && root !== null)
      for (const name of listDir(root)) dirs.push(join(root, name));
    for (const dir of dirs) this.watchedRuns.add(dir);
    for (const dir of this.watchedRuns) this.watchRun(dir);
    if (this.sweep) clearTimeout(this.sweep);
    this.sweep = null;
    if (!this.closed && view.runs.some((r) => r.phase === "running"))
      this.sweep = setTimeout(
        () => this.changed({ run: "all", logsOnly: false, sessions: true }),
        this.options.sweepMs,
      ).unref();
  }

  /**
   * Plain directory watches on a run folder, its status/ and its logs/: a chatty agent appends
   * to its log a hundred times a second and the driver rewrites state.json (a temp file renamed)
   * at each change, and chokidar stats the file and walks its folder on each of those (about
   * 1 ms of CPU each here), where a plain watch only says which name in the folder changed. A
   * folder not there yet is tried again at the next view (a task's launch writes its status file
   * after logs/ appears); once it is watched, one more view reads what was written before the
   * watch began.
   *
   * A log's first append after a view is all the feed needs to know until the next view reads the
   * logs: the logs/ watch closes at its first event and opens again as the next view begins
   * (`resumeLogs`), before it reads, so no append goes unseen; a chatty agent's hundred appends a
   * second were a hundred wake-ups of this process (a fifth of its CPU).
   */
  private watchRun(runDir: string, announce = true): void {
    const watchers = this.runWatchers.get(runDir) ?? new Map<"run" | "status" | "logs", DirWatcher>();
    this.runWatchers.set(runDir, watchers);
    const kinds = [
      ["run", runDir],
      ["status", join(runDir, "status")],
      ["logs", join(runDir, "logs")],
    ] as const;
    for (const [kind, dir] of kinds) {
      if (watchers.has(kind)) continue;
      let watcher: DirWatcher;
      try {
        watcher = watch(dir, (event, name) => {
          // The folder itself removed: this watch sees nothing any more; the next view watches anew.
          if (event === "rename" && !existsSync(dir)) drop();
          if (kind === "run" && !(name !== null && RUN_FILES.has(String(name)))) return;
          if (kind === "logs") {
            drop();
            this.logsPaused.add(runDir);
          }
          this.changed({
            run: this.inView.has(runDir) ? runDir : "all",
            logsOnly: kind === "logs",
            sessions: kind === "status" || (name !== null && SESSION_FILES.has(String(name))),
            state: kind === "status" || (kind === "run" && STATE_FILES.has(String(name))),
          });
        });
      } catch {
        continue;
      }
      const drop = (): void => {
        watcher.close();
        if (watchers.get(kind) === watcher) watchers.delete(kind);
      };
      watcher.on("error", () => {
        drop();
        this.changed({ run: "all", logsOnly: false, sessions: true });
      });
      watchers.set(kind, watcher);
      if (announce)
        this.changed({
          run: this.inView.has(runDir) ? runDir : "all",
          logsOnly: kind === "logs",
          sessions: kind !== "logs",
          state: kind !== "logs",
        });
    }
  }

  /**
   * `run`: the run folder whose files changed, or "all" when which runs there are may have;
   * `sessions`: whether the change can have started or ended a task's session; `state`: whether
   * it can have changed the run's state (else its view is drawn again from the state it had).
   */
  private changed(change: { run?: string; logsOnly: boolean; sessions?: boolean; state?: boolean }): void {
    if (change.run === "all") this.since.all = true;
    else if (change.run !== undefined) {
      this.since.runs.add(change.run);
      if (change.state) this.since.states.add(change.run);
    }
    if (!change.logsOnly) this.since.logsOnly = false;
    if (change.sessions) this.since.sessions = true;
    if (this.closed) return;
    const now = this.options.now();
    const throttle = this.since.logsOnly ? this.options.logThrottleMs : this.options.throttleMs;
    const due = Math.max(now, this.lastRun + throttle);
    // A view already due sooner stays; one held back for logs is brought forward by another change.
    if (this.timer && this.due <= due) return;
    if (this.timer) clearTimeout(this.timer);
    this.due = due;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.recompute();
    }, due - now);
  }

  /**
   * A task's start or end lists the sessions again, unless they were listed less than
   * `sessionsMs` ago: then a later view lists them. A sweep or a refresh (`all`) lists them now.
   */
  private spaceSessions(since: Changes): void {
    const listedAt = this.kept?.sessionsListedAt ?? Number.NEGATIVE_INFINITY;
    const wait = listedAt + this.options.sessionsMs - this.options.now();
    if (!since.sessions || since.all || wait <= 0) return;
    since.sessions = false;
    this.sessionsLater ??= setTimeout(() => {
      this.sessionsLater = null;
      this.changed({ logsOnly: false, sessions: true });
    }, wait);
  }

  /** The logs/ watches closed since the last view, open again before this one reads the logs. */
  private resumeLogs(): void {
    for (const runDir of this.logsPaused) this.watchRun(runDir, false);
    this.logsPaused.clear();
  }

  private async recompute(): Promise<void> {
    if (this.computing) {
      this.again = true;
      return;
    }
    this.resumeLogs();
    this.lastRun = this.options.now();
    const since = this.since;
    this.since = noChanges();
    this.spaceSessions(since);
    this.computing = (async () => {
      try {
        const { env, cwd, now } = this.options;
        const { view, kept } = await compute(this.scope, env, cwd, now(), this.kept, since);
        if (this.closed) return;
        this.view = view;
        this.kept = kept;
        this.follow(view);
        for (const listener of this.listeners) listener(view);
      } catch {
        // A run directory removed mid-read, or a registry being rewritten: the next change reads
        // again, everything (what changed since this view began is not all that changed).
        this.kept = null;
      }
    })();
    await this.computing;
    this.computing = null;
    if (this.again) {
      this.again = false;
      this.changed({ logsOnly: true });
    }
  }
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

type Sessions = Map<string, Map<string, SessionInfo>>;

/** What a view read that the next one may use again. */
interface Kept {
  runs: OpsRun[];
  queued: QueuedRunView[];
  /** The sessions of each socket, and when they were listed. */
  sessions: Sessions;
  sessionsListedAt: number;
  /** The views of reported runs (by run folder), with the sessions of their tasks they showed. */
  finished: Map<string, { view: RunView; sessions: string }>;
  /**
   * Whether a reported run still showed a session: the driver closes its sessions after its last
   * write, and `clean` closes kept ones without writing to the run, so the next view lists them.
   */
  closing: boolean;
  /** The task journals of the live runs in view, each read from where the last view stopped. */
  journals: JournalReaders;
}

/**
 * What changed since a view: `all` (which runs the scope has may have changed: its folder had an
 * event, or a sweep or a refresh asks), the run folders with file events, and whether all these
 * were log appends.
 */
interface Changes {
  all: boolean;
  runs: Set<string>;
  /** Of those, the runs whose state may have changed (state.json, a status file). */
  states: Set<string>;
  logsOnly: boolean;
  /** A change that can start or end a session (status/, the scope's folder, a sweep, a refresh). */
  sessions: boolean;
}

function noChanges(): Changes {
  return { all: false, runs: new Set(), states: new Set(), logsOnly: true, sessions: false };
}

/**
 * The runs of the scope: read again when they may have changed; else the last ones, those whose
 * state may have changed read again (null when one of them is no longer the same run: read them all).
 */
async function rescan(last: Kept | null, since: Changes, journals: JournalReaders): Promise<OpsRun[] | null> {
  if (!last || since.all) return null;
  const runs: OpsRun[] = [];
  for (const run of last.runs) {
    if (!since.states.has(run.runDir)) runs.push(run);
    else {
      const read = await readRunState(run.runDir, journals);
      if (!("state" in read) || read.state.run_id !== run.runId) return null;
      runs.push({ ...run, state: read.state, problem: null });
    }
  }
  return runs;
}

/** The sessions of a run's tasks, as a key: a killed session changes a finished run's view. */
function sessionsKey(view: RunView, sessions: Map<string, SessionInfo>): string {
  return JSON.stringify(view.tasks.map((t) => (t.session ? (sessions.get(t.session) ?? null) : null)));
}

/**
 * The scope's view, what `termorch status --json` prints, with three savings for a feed that
 * recomputes several times a second while an agent writes its log: only the runs whose folders
 * had events are read again (unless the scope's folder had one); only a change of status/ can
 * start or end a session (a task's launch and end each write a status file; a vanished one is the
 * sweep's), so otherwise the last sessions stand; and a reported run whose files had no event and whose
 * sessions are as they were shows what it showed (nothing in it depends on the time).
 */
async function compute(
  scope: RunScope,
  env: Env,
  cwd: string,
  now: number,
  last: Kept | null,
  since: Changes,
): Promise<{ view: StatusView; kept: Kept }> {
  const journals = last?.journals ?? new JournalReaders();
  const rescanned = await rescan(last, since, journals);
  const runs = rescanned ?? (await scopeRuns(scope, env, cwd));
  // A claimed run starts (or a new one is claimed) in the scope's folder: an event read everything.
  const queued = rescanned && last ? last.queued : await scopeQueued(scope);
  const sockets = new Set(runs.flatMap((r) => (r.state ? [r.state.socket] : [])));
  const keep = last && !since.sessions && !last.closing && [...sockets].every((s) => last.sessions.has(s));
  const sessions = keep ? last.sessions : await sessionsBySocket(sockets, env);
  const sessionsListedAt = keep ? last.sessionsListedAt : now;
  const sessionsOf = (socket: string) => sessions.get(socket) ?? new Map<string, SessionInfo>();
  // Sessions not listed again are the same for every finished run: their keys need no new look.
  const sameSessions = sessions === last?.sessions;
  const reuse = (state: RunState): RunView | undefined => {
    const before = last?.finished.get(state.run_dir);
    if (!before || since.runs.has(state.run_dir) || state.phase !== "reported") return undefined;
    const same =
      before.view.run_id === state.run_id &&
      before.view.updated_at === new Date(state.updated_at).toISOString() &&
      (sameSessions || before.sessions === sessionsKey(before.view, sessionsOf(state.socket)));
    return same ? before.view : undefined;
  };
  const view = { ...(await statusView(runs, sessionsOf, now, reuse)), queued };
  const finished = new Map<string, { view: RunView; sessions: string }>();
  for (const run of view.runs) {
    // A task that shows as running in a reported run (its status file says so) has an elapsed time.
    if (run.phase !== "reported" || run.tasks.some((t) => t.state === "running")) continue;
    const before = last?.finished.get(run.run_dir);
    const key =
      sameSessions && before?.view === run ? before.sessions : sessionsKey(run, sessionsOf(run.socket));
    finished.set(run.run_dir, { view: run, sessions: key });
  }
  const closing = view.runs.some((r) => r.phase === "reported" && r.tasks.some((t) => t.session_exists));
  journals.keepOnly(
    new Set(runs.flatMap((r) => (r.state?.task_journal ? [r.state.task_journal] : []))),
    new Set(runs.map((r) => r.runDir)),
  );
  return { view, kept: { runs, queued, sessions, sessionsListedAt, finished, closing, journals } };
}
