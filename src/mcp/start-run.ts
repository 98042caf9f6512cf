import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { closeSync, existsSync, openSync, readFileSync, rmSync } from "node:fs";
import { mkdir, readdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { pollUntil } from "../concurrency/poll-until.js";
import { ClaimRecord } from "../contract/claim.js";
import { DriverStarted, type RunInput, type RunOutput } from "../contract/mcp.js";
import { runIdFor } from "../daemon/claim.js";
import { homeLayout } from "../daemon/daemon.js";
import { ChildCommandError, ExitCode, InputError } from "../errors.js";
import { compactTimestamp } from "../fs/log-names.js";
import { ensureUserDir, mcpDir, registryDir } from "../fs/names.js";

type Env = Readonly<Record<string, string | undefined>>;

/** How long a driver may take to validate and prepare before its run has an id and a folder. */
const START_MS = 45_000;
/** How long a daemon may take to claim a dropped file before it is taken back. */
const CLAIM_MS = 20_000;

/**
 * An inline document, kept where a resume finds it: a folder of its own in the per-user folder's
 * `mcp/`, owner-only, as `assignments.json` (so its runs are named `assignments-<time>`, as a
 * file of that name would make them).
 */
export async function keepInline(doc: Record<string, unknown>): Promise<string> {
  const file = join(await keptDir(), "assignments.json");
  await writeFile(file, `${JSON.stringify(doc, null, 2)}\n`, { mode: 0o600, flag: "wx" });
  return file;
}

/** An objective given inline to `plan`, kept in a file of its own (removed with dropInline once planned). */
export async function keepObjective(text: string): Promise<string> {
  const file = join(await keptDir(), "OBJECTIVE.md");
  await writeFile(file, text, { mode: 0o600, flag: "wx" });
  return file;
}

/** A new private folder of termorch mcp's own, for what a call gave inline. */
async function keptDir(): Promise<string> {
  await ensureUserDir();
  const dir = join(mcpDir(), `${compactTimestamp(Date.now())}-${randomBytes(4).toString("hex")}`);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/** Removes a kept inline document that no run needs. */
export async function dropInline(file: string): Promise<void> {
  await rm(dirname(file), { recursive: true, force: true });
}

/** `termorch run`'s flags for the options a caller gave; paths made absolute from `cwd`. */
export function runFlags(o: RunInput, cwd: string): string[] {
  const flags: string[] = [];
  const value = (flag: string, v: string | number | undefined): void => {
    if (v !== undefined) flags.push(flag, String(v));
  };
  const on = (flag: string, v: boolean | undefined): void => {
    if (v) flags.push(flag);
  };
  value("--config", o.config === undefined ? undefined : resolve(cwd, o.config));
  value("--out", o.out === undefined ? undefined : resolve(cwd, o.out));
  if (o.verify === false) flags.push("--no-verify");
  value("--max-parallel", o.max_parallel);
  value("--schedule", o.schedule);
  on("--fail-fast", o.fail_fast);
  on("--keep-sessions", o.keep_sessions);
  on("--clean", o.clean);
  on("--keep-branches", o.keep_branches);
  on("--allow-dirty", o.allow_dirty);
  value("--backend", o.backend);
  value("--redis", o.redis);
  return flags;
}

/** The CLI's entry point, from this module or the bundle beside it (dist/cli/ → bin/termorch.js). */
function termorchBin(): string {
  return fileURLToPath(new URL("../../bin/termorch.js", import.meta.url));
}

/**
 * Starts `termorch run` as a detached driver (its own session and process group, no pipe to this
 * process), so that the run goes on whatever happens to the MCP server, and answers once the run
 * has its id and folder, its state.json and its registry entry (status and wait find it by
 * either). A driver that exits before (invalid input, a locked workspace) is an error carrying
 * its message and exit code.
 */
export async function startDriver(o: {
  file: string;
  /** For an inline document: the folder it stands for. */
  baseDir: string | null;
  flags: string[];
  env: Env;
  cwd: string;
}): Promise<RunOutput> {
  await ensureUserDir();
  const dir = mcpDir();
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const key = `driver-${compactTimestamp(Date.now())}-${randomBytes(4).toString("hex")}`;
  const startedFile = join(dir, `${key}.started.json`);
  const logFile = join(dir, `${key}.log`);
  const log = openSync(logFile, "w", 0o600);
  const argv = [
    termorchBin(),
    "run",
    o.file,
    ...(o.baseDir ? ["--base-dir", o.baseDir] : []),
    "--started-file",
    startedFile,
    ...o.flags,
  ];
  let exit: number | null = null;
  const child = spawn(process.execPath, argv, {
    cwd: o.cwd,
    env: o.env as NodeJS.ProcessEnv,
    detached: true,
    stdio: ["ignore", "ignore", log],
  });
  closeSync(log);
  child.on("exit", (code, signal) => {
    exit = code ?? (signal ? 128 : 70);
  });
  child.on("error", () => {
    exit = 70;
  });
  child.unref();
  try {
    await pollUntil(() => exit !== null || existsSync(startedFile), START_MS, 50);
    if (existsSync(startedFile)) {
      const started = DriverStarted.parse(JSON.parse(readFileSync(startedFile, "utf8")));
      // Its state.json, then its registry entry, come right after: from then on status and wait
      // find the run by its folder and by its id (a wait asked between the two found no run).
      const entry = join(registryDir(o.env), `${started.run_id}.json`);
      const found = () => existsSync(join(started.run_dir, "state.json")) && existsSync(entry);
      await pollUntil(() => found() || exit !== null, 10_000, 50);
      return {
        run_id: started.run_id,
        run_dir: started.run_dir,
        owner: "driver",
        pid: started.pid,
        tasks: started.tasks,
        next: `wait with run "${started.run_id}" until finished, then report`,
      };
    }
    if (exit === null)
      throw new ChildCommandError(
        `the run's driver (pid ${child.pid}) has not started the run after ${START_MS / 1000} s; it goes on: find it with the status tool`,
        ExitCode.internal,
      );
    throw new ChildCommandError(driverMessage(readFileSync(logFile, "utf8")), exit);
  } finally {
    // The driver keeps writing to its log's inode, which goes with its last handle.
    rmSync(logFile, { force: true });
    rmSync(startedFile, { force: true });
  }
}

/**
 * `termorch run`'s stderr as one message: its lines without their indents, and without the label
 * line (`termorch: invalid input:`) that the error's kind says again.
 */
function driverMessage(text: string): string {
  const lines = text
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("report:") && !/^termorch: [a-z_ ]+:$/.test(l));
  return lines.join("\n").replace(/^termorch: /, "") || "the run's driver exited before the run started";
}

/**
 * Hands a document to the daemon of `home`: dropped into its inbox (as one rename, so the daemon
 * never sees half of it) with `workspace_dir` made absolute, since the daemon takes it relative to
 * the inbox. Answers once the daemon has claimed it; a file no daemon claims in time is taken back.
 */
export async function dropInInbox(o: {
  home: string;
  doc: Record<string, unknown>;
  /** The folder the document's relative `workspace_dir` is relative to. */
  baseDir: string;
}): Promise<RunOutput> {
  const layout = homeLayout(o.home);
  if (!existsSync(layout.inbox))
    throw new InputError(
      [{ file: layout.inbox, message: "no inbox here: not a termorch daemon home" }],
      `Start the daemon first: termorch daemon --home ${layout.root}`,
    );
  const doc = withAbsoluteWorkspace(o.doc, o.baseDir);
  const name = `mcp-${compactTimestamp(Date.now())}-${randomBytes(4).toString("hex")}.json`;
  const path = join(layout.inbox, name);
  const temp = join(layout.inbox, `.${name}`);
  await writeFile(temp, `${JSON.stringify(doc, null, 2)}\n`, { mode: 0o600 });
  await rename(temp, path);
  const wanted = await runIdFor(path).catch(() => name.replace(/\.json$/, ""));
  let found: string | null = null;
  const look = async (): Promise<string | null> => {
    for (const run of await readdir(layout.runs).catch(() => [] as string[])) {
      if (!run.startsWith(wanted)) continue;
      const claim = await readFile(join(layout.runs, run, "claim.json"), "utf8").catch(() => null);
      const parsed = claim ? ClaimRecord.safeParse(safeJson(claim)) : null;
      if (parsed?.success && resolve(parsed.data.source) === path) return run;
    }
    return null;
  };
  const end = Date.now() + CLAIM_MS;
  while (found === null && Date.now() < end) {
    found = await look();
    if (found === null) await new Promise((r) => setTimeout(r, 100));
  }
  if (found === null) {
    // Taken back unless the daemon claimed it meanwhile (then it is gone from the inbox).
    const taken = await rm(path).then(
      () => true,
      () => false,
    );
    if (taken)
      throw new InputError(
        [
          {
            file: layout.inbox,
            message: `no daemon took the assignments from this inbox within ${CLAIM_MS / 1000} s, so they were taken back`,
          },
        ],
        `Start the daemon: termorch daemon --home ${layout.root}`,
      );
    found = await look();
    if (found === null)
      throw new ChildCommandError(
        `the daemon took ${path} but its run folder is not found`,
        ExitCode.internal,
      );
  }
  const runDir = join(layout.runs, found);
  const tasks = Array.isArray(doc.tasks) ? doc.tasks.length : 0;
  return {
    run_id: found,
    run_dir: runDir,
    owner: "daemon",
    pid: null,
    tasks,
    next: `wait with run "${runDir}" until finished, then report`,
  };
}

function withAbsoluteWorkspace(doc: Record<string, unknown>, baseDir: string): Record<string, unknown> {
  const env = doc.environment;
  if (env === null || typeof env !== "object" || Array.isArray(env)) return doc;
  const workspace = (env as Record<string, unknown>).workspace_dir;
  if (typeof workspace !== "string") return doc;
  return { ...doc, environment: { ...env, workspace_dir: resolve(baseDir, workspace) } };
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
