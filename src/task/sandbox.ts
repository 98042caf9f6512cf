/**
 * One attempt's sandbox (docs/guides/sandbox.md): before the launch, its folder (the /tmp
 * the agent sees, its view of the repository, the network relay's routes) and the command line
 * that the pane supervisor puts in front of the agent's argv; after the exit, the commits the
 * agent made in its view of the repository, brought into the real one. The supervisor itself
 * stays outside: logs, exit record, signals and reaping keep their contract.
 */
import { createHash } from "node:crypto";
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { errorText } from "../errors.js";
import { REPORT_HTML, RUN_TOP_NAMES, registryDir, userDir } from "../fs/names.js";
import { pastRunDirs, registeredRuns } from "../fs/registry.js";
import {
  type AgentBase,
  headIn,
  makeAgentRepo,
  restoreGitFile,
  snapshotObjects,
  snapshotRepoObjects,
  takeAgentCommits,
} from "../git/sandbox-repo.js";
import {
  bwrapArgs,
  expandHome,
  inside,
  needsLowPorts,
  proxyEnv,
  routesFile,
  routesOf,
  type SandboxPlace,
  type SandboxSetting,
} from "../sandbox/policy.js";
import { sandboxTools } from "../sandbox/probe.js";
import { seccompFilter } from "../sandbox/seccomp.js";
import type { Ports } from "./ports.js";
import type { RunPlan } from "./run-plan.js";
import type { AgentPlan, TaskPlan } from "./task-plan.js";

const SHIM = fileURLToPath(new URL("../sandbox/sandbox.pl", import.meta.url));

/** The folder of one attempt's sandbox, in the run's private folder. */
export function sandboxDirOf(privateDir: string, taskId: string, attempt: number): string {
  return join(privateDir, "sandbox", taskId, String(attempt));
}

/**
 * The network relay's folder of a sandbox: short, because a socket's path must fit in 108 bytes,
 * and found again from the sandbox's folder by a resumed run.
 */
function relayDirOf(dir: string): string {
  return join(userDir(), "net", createHash("sha256").update(dir).digest("hex").slice(0, 16));
}

/** What runs in a sandbox, and what of the machine it must see besides the read-only rest. */
export interface SandboxedWork {
  /** Its worktree (its view of the repository is made from it), or null when the workspace is no repository. */
  worktree: string | null;
  /** Its task branch, the one of the run's it sees; null: none (a run-level gate). */
  branch: string | null;
  /** Where it starts: in the worktree, or the workspace itself (then writable, unless `readOnly`). */
  cwd: string;
  /** Without a worktree: `cwd` is bound read-only (a reviewer's copy of the work). */
  readOnly?: boolean;
  /** Where it starts inside what is bound, when not `cwd` (a reviewer's workspace inside its copy). */
  chdir?: string;
  /** The home `~/` rules name. */
  home: string;
  /** Writable besides the worktree (made when missing): the artifacts folder; the handoff, the file its hooks append to. */
  writable: { folders: readonly string[]; files: readonly string[] };
  /** Readable even where the sandbox hides: its context and prompt files, its CLI's folder of the task. */
  readable: readonly string[];
}

/** An agent's work in its sandbox; its task's set-up and tests_cmd run in the same one. */
export function agentWork(
  p: Pick<TaskPlan, "workspace" | "gates" | "prompt">,
  agent: Pick<AgentPlan, "argv" | "interactive" | "env">,
): SandboxedWork {
  const { worktree, branch, cwd, artifactsDir } = p.workspace;
  const { handoff } = p.gates;
  const events = agent.interactive?.events?.file;
  return {
    worktree,
    branch,
    cwd,
    home: agent.env.HOME ?? "/",
    writable: {
      folders: [artifactsDir],
      files: [...(handoff ? [handoff] : []), ...(events ? [events] : [])],
    },
    readable: [
      p.prompt.context,
      p.prompt.file,
      ...(agent.interactive?.events?.configDir ? [agent.interactive.events.configDir.path] : []),
      // Files its command line names (its program, a script), wherever they are (a /tmp checkout).
      ...agent.argv.filter((a) => a.startsWith("/") && kindOf(a) === "file"),
    ],
  };
}

/** A sandbox for `work` in `dir`, for a run: what goes in front of the command's argv (prepareSandbox). */
export async function sandboxFor(
  run: Pick<RunPlan, "runDir" | "privateDir" | "processEnv" | "git">,
  ports: Pick<Ports, "runner">,
  setting: SandboxSetting,
  work: SandboxedWork,
  dir: string,
): Promise<string[]> {
  const socketPath = await ports.runner.socketPath();
  let base: AgentBase | null = null;
  if (run.git && work.worktree) {
    base = { commit: run.git.baseCommit, objects: objectsOf(run) };
    await runObjects(work.worktree, base.objects);
  }
  return prepareSandbox(setting, work, {
    dir,
    runDir: run.runDir,
    socketPath,
    processEnv: run.processEnv,
    base,
  });
}

const objectsOf = (run: Pick<RunPlan, "privateDir">): string => join(run.privateDir, "sandbox", "objects");

/**
 * A new run with a sandboxed task in a repository takes the snapshot of its objects before any
 * agent runs: one taken at the first sandboxed launch would hold the work of tasks that finished
 * before it (an unsandboxed task committed meanwhile), which a sandboxed agent must not read.
 */
export async function snapshotRunObjects(run: Pick<RunPlan, "git" | "privateDir" | "plans">): Promise<void> {
  const sandboxed = (p: TaskPlan): boolean =>
    p.workspace.worktree !== null && p.agents.some((a) => a.sandbox !== null);
  if (!run.git || ![...run.plans.values()].some(sandboxed)) return;
  const dest = objectsOf(run);
  if (snapshots.has(dest) || existsSync(dest)) return;
  const made = snapshotRepoObjects(run.git.root, dest);
  snapshots.set(dest, made);
  await made;
}

/** The run's snapshot of the repository's objects, made once (a resumed run finds it made). */
const snapshots = new Map<string, Promise<void>>();
function runObjects(worktree: string, dest: string): Promise<void> {
  let made = snapshots.get(dest);
  if (!made) {
    made = existsSync(dest)
      ? Promise.resolve()
      : Promise.resolve().then(() => snapshotObjects(worktree, dest));
    snapshots.set(dest, made);
  }
  return made;
}

/**
 * Sets up a sandbox in `where.dir` (an attempt's, a gate's); returns what to put in front of the
 * command's argv. Throws when this machine cannot make one (validation refuses such a run first).
 */
export async function prepareSandbox(
  setting: SandboxSetting,
  work: SandboxedWork,
  where: {
    dir: string;
    runDir: string;
    socketPath: string;
    processEnv: Readonly<Record<string, string | undefined>>;
    /** The objects it may read (with a worktree): src/git/sandbox-repo.ts. */
    base: AgentBase | null;
  },
): Promise<string[]> {
  const tools = sandboxTools(where.processEnv.PATH);
  if (typeof tools === "string") throw new Error(tools);
  const { dir } = where;
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(join(dir, "tmp"), { recursive: true, mode: 0o700 });
  // What it may write exists, so that it can be bound.
  for (const folder of work.writable.folders) mkdirSync(folder, { recursive: true, mode: 0o700 });
  for (const file of work.writable.files) {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    writeFileSync(file, "", { flag: "a", mode: 0o600 });
  }
  // A writable folder the CLI has not made yet (its first run): made, empty, as it would be.
  for (const w of setting.allowWrite)
    if (w.endsWith("/")) mkdirSync(expandHome(w, work.home), { recursive: true, mode: 0o700 });
  const repo =
    work.worktree && where.base
      ? await makeAgentRepo(work.worktree, join(dir, "git"), work.branch, where.base)
      : null;
  // Kept where the agent cannot reach them: what to put back if it changes it, and where its
  // branch was (endSandbox).
  if (work.worktree) copyFileSync(join(work.worktree, ".git"), join(dir, "gitfile"));
  if (repo) writeFileSync(join(dir, "refs"), repo.refs);
  let relay: SandboxPlace["relay"] = null;
  if (typeof setting.network !== "string") {
    const relayDir = relayDirOf(dir);
    mkdirSync(relayDir, { recursive: true, mode: 0o700 });
    const routes = routesOf(setting.network);
    writeFileSync(join(relayDir, "routes"), routesFile(routes));
    relay = {
      dir: relayDir,
      env: proxyEnv(routes),
      lowPorts: needsLowPorts(routes) && process.getuid?.() === 0,
    };
  }
  const resolvConf = realResolvConf();
  // Kept where the agent cannot reach it, like the rest of this folder (the run's private one).
  const filter = seccompFilter(process.arch);
  if (filter) writeFileSync(join(dir, "seccomp.bpf"), filter, { mode: 0o600 });
  const place: SandboxPlace = {
    home: work.home,
    worktree: work.worktree ?? work.cwd,
    ...(work.worktree === null && work.readOnly ? { readOnly: true } : {}),
    tmp: join(dir, "tmp"),
    writable: [...work.writable.folders, ...work.writable.files],
    // termorch's own shim runs inside too, wherever termorch is installed.
    readable: [SHIM, ...work.readable],
    hidden: [
      userDir(),
      registryDir(where.processEnv),
      where.runDir,
      dirname(where.socketPath),
      ...(await otherRuns(where.runDir, work.home, where.processEnv)),
    ],
    git: repo,
    resolvConf,
    relay,
  };
  const args = [...bwrapArgs(setting, place, kindOf), "--chdir", work.chdir ?? work.cwd];
  const end = relay ? [relay.dir] : [];
  return [
    tools.perl,
    SHIM,
    "outside",
    ...(filter ? ["--seccomp", join(dir, "seccomp.bpf")] : []),
    ...end,
    "--",
    tools.bwrap,
    ...args,
    "--",
    tools.perl,
    SHIM,
    "inside",
    ...end,
    "--",
  ];
}

/**
 * After the sandbox's command exited: its worktree's `.git` as it was, then (with a `branch`) the
 * commits it made on its task branch into the repository. Returns a note of what went otherwise
 * (its worktree still holds its work, which termorch commits).
 */
export async function endSandbox(
  dir: string,
  p: { worktree: string | null; branch: string | null },
): Promise<string | null> {
  rmSync(relayDirOf(dir), { recursive: true, force: true });
  const notes: string[] = [];
  const saved = join(dir, "gitfile");
  if (p.worktree && existsSync(saved) && restoreGitFile(p.worktree, readFileSync(saved, "utf8")))
    notes.push("the agent changed its worktree's .git, which was put back before termorch's git ran there");
  const start =
    p.branch && existsSync(join(dir, "refs"))
      ? headIn(readFileSync(join(dir, "refs"), "utf8"), p.branch)
      : null;
  if (p.worktree && p.branch && start)
    try {
      await takeAgentCommits(join(dir, "git"), p.worktree, p.branch, start);
    } catch (error) {
      notes.push(
        `the commits the agent made in its sandbox could not be taken (${errorText(error)}); what its worktree holds is committed instead`,
      );
    }
  rmSync(dir, { recursive: true, force: true });
  return notes.length ? notes.join("; ") : null;
}

/**
 * What of other runs is hidden besides this one's folder: their folders (their logs, artifacts and
 * reports may hold what an agent must not read, a secret copied into an artifact say). They are
 * found where termorch knows of runs: the registry (runs not cleaned yet, this machine's other
 * runs going on), the past runs' list (cleaned ones whose folder stays), and the folders beside
 * this run's that hold a run (`.termorch/runs/`, a daemon's `runs/`, `--out` folders side by side).
 * A folder that holds the agent's home is not hidden whole (its tools would go): its run files are.
 */
async function otherRuns(
  runDir: string,
  home: string,
  env: Readonly<Record<string, string | undefined>>,
): Promise<string[]> {
  const registered = (await registeredRuns(env).catch(() => [])).map((e) => e.run_dir);
  const past = await pastRunDirs().catch(() => []);
  let beside: string[] = [];
  try {
    const parent = dirname(runDir);
    beside = readdirSync(parent)
      .map((name) => join(parent, name))
      .filter((dir) => dir !== runDir && existsSync(join(dir, "state.json")));
  } catch {}
  const dirs = [...new Set([...registered, ...past, ...beside])].filter((d) => d !== runDir);
  return dirs.flatMap((d) =>
    inside(home, d) ? [...RUN_TOP_NAMES, REPORT_HTML].map((name) => join(d, name)) : [d],
  );
}

function kindOf(path: string): "dir" | "file" | null {
  const st = statSync(path, { throwIfNoEntry: false });
  return st === undefined ? null : st.isDirectory() ? "dir" : "file";
}

/** /etc/resolv.conf's real file when it lives under /run (systemd-resolved), which the sandbox empties. */
function realResolvConf(): string | null {
  try {
    const real = realpathSync("/etc/resolv.conf");
    return inside(real, "/run") ? real : null;
  } catch {
    return null;
  }
}
