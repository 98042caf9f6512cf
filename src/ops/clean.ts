import { existsSync } from "node:fs";
import { lstat, readdir, realpath, rm, rmdir } from "node:fs/promises";
import { dirname, join, relative } from "node:path";
import type { Config } from "../contract/config.js";
import type { RunState } from "../contract/state.js";
import { errorText } from "../errors.js";
import {
  mcpDir,
  redoBaseRefOf,
  redoRefsOf,
  runBranchesPrefix,
  runWorktreesDir,
  workRefsOf,
} from "../fs/names.js";
import { registeredRuns, unregisterRun } from "../fs/registry.js";
import { deleteRemoteRefsUnder, runRefsOf, shownRemote } from "../git/remote.js";
import { git } from "../git/repo.js";
import {
  deleteBranch,
  isBranch,
  listWorktrees,
  removeWorktree,
  removeWorktrees as removeWorktreeFolders,
} from "../git/worktree.js";
import { loadConfig } from "../input/config-file.js";
import { deadPlanners, plansDirOf, removeDeadCopies } from "../planning/plan-leftovers.js";
import { endLeftovers } from "./leftovers.js";
import { driverAlive } from "./liveness.js";
import { type OpsRun, phaseOf } from "./runs.js";
import { serverFor } from "./sessions.js";

type Env = Readonly<Record<string, string | undefined>>;

/** How long leftover processes get between TERM and KILL. */
const LEFTOVER_GRACE_MS = 3000;

/** Whether a run may be cleaned, and the words to say so. */
export type CleanDecision = { clean: true; label: string } | { clean: false; label: string; hint: string };

/** Something clean left in place, and why. */
export interface Kept {
  what: string;
  why: string;
}

/** What `termorch clean` did to one run. */
export interface CleanReport {
  runId: string;
  runDir: string;
  decision: CleanDecision;
  removed: string[];
  kept: Kept[];
  unregistered: boolean;
}

/**
 * Conservative on purpose: a run is cleaned only when nothing will drive it again. A finished
 * run (its report written) is; a live one is not; an interrupted one only when it cannot be
 * resumed (its assignments file or workspace is gone), since resume would finish it.
 */
export function cleanDecision(run: OpsRun): CleanDecision {
  const state = run.state;
  if (!state) {
    // Only the registry entry is left: trust its pid, whoever it is now.
    if (run.entry && driverAlive(run.entry.pid, null))
      return {
        clean: false,
        label: `${run.problem}; its driver pid ${run.entry.pid} is alive`,
        hint: "wait for it to end, then clean again",
      };
    return { clean: true, label: run.problem ?? "no state" };
  }
  const phase = phaseOf(state);
  if (phase === "reported" && state.stopped !== null)
    return {
      clean: false,
      label: `stopped at its wave boundary (${state.stopped}) and resumable`,
      hint: `go on with termorch resume ${state.run_dir}, then clean`,
    };
  if (phase === "reported") return { clean: true, label: `finished (exit ${state.exit_code ?? "unknown"})` };
  if (phase === "running")
    return {
      clean: false,
      label: `live: its driver (pid ${state.pid}) is running`,
      hint: `cancel it first: termorch cancel ${state.run_id}`,
    };
  const gone = [
    !existsSync(state.assignments_file) && `its assignments file ${state.assignments_file} is gone`,
    !existsSync(state.workspace) && `its workspace ${state.workspace} is gone`,
  ].filter((x): x is string => typeof x === "string");
  if (gone.length > 0) return { clean: true, label: `interrupted and not resumable: ${gone.join("; ")}` };
  return {
    clean: false,
    label: `interrupted (driver pid ${state.pid} is gone) but resumable`,
    hint: `finish it with termorch resume ${state.run_dir} (after termorch cancel ${state.run_id} it stops at once), then clean`,
  };
}

/**
 * A document `termorch mcp` was given inline is kept in a folder of its own for its run's resume;
 * a finished run needs it no more.
 */
async function dropInlineDocument(state: RunState | null, report: CleanReport): Promise<void> {
  if (state?.phase !== "reported") return;
  const folder = dirname(state.assignments_file);
  // Outside a repository the kept folder is the run directory too, which clean never touches.
  if (dirname(folder) !== mcpDir() || folder === state.run_dir || !existsSync(folder)) return;
  await rm(folder, { recursive: true, force: true });
  report.removed.push(`the inline assignments termorch mcp kept (${folder})`);
}

/**
 * Removes what a finished run left behind: its tmux sessions, task worktrees and
 * `termorch/<run>/*` branches (a branch whose commits no other ref holds, and a worktree with
 * uncommitted changes, are kept unless `force`), then its registry entry once nothing is kept.
 * The run directory (report, logs, status, artifacts) is never touched: it is the run's result.
 */
export async function cleanRun(
  run: OpsRun,
  opts: { force: boolean; env: Env; redis?: string },
): Promise<CleanReport> {
  const decision = cleanDecision(run);
  const report: CleanReport = {
    runId: run.runId,
    runDir: run.runDir,
    decision,
    removed: [],
    kept: [],
    unregistered: false,
  };
  if (!decision.clean) return report;
  const runId = run.runId;
  const socket = run.state?.socket ?? run.entry?.socket ?? null;
  if (socket) await closeSessions(run, socket, opts.env, report);

  const ownRoot = runWorktreesDir(runId);
  // What the run started and its supervisors could not end (a supervisor killed, a process outside
  // their reach): a finished run has nothing left to run.
  const leftovers = await endLeftovers({ runDir: run.runDir, runId, graceMs: LEFTOVER_GRACE_MS });
  if (leftovers.ended > 0)
    report.removed.push(`${leftovers.ended} process(es) of the run that were still running`);
  for (const c of leftovers.cgroups) report.removed.push(`cgroup ${c}`);
  report.kept.push(...leftovers.kept);
  const repo = run.state
    ? (run.state.git?.root ?? null)
    : (run.siblingRepo ?? (await repoOfWorktrees(ownRoot)));
  if (repo && existsSync(repo)) {
    await removeWorktrees(repo, runId, ownRoot, opts.force, report);
    // Refs the run's agents created go first, while the task branches still hold their commits.
    // Only branches: a run of an older termorch may have recorded other refs.
    const agentRefs = (run.state?.tasks ?? []).flatMap((t) => t.git.refsCreated.filter(isBranch));
    // Before the branches: a redone task's earlier result would otherwise count as held elsewhere.
    await deleteRedoRefs(repo, runId, opts.force, report);
    await deleteBranches(repo, runId, opts.force, report, agentRefs);
    if (run.state?.options.backend === "bullmq") await cleanScaleOut(run.state, repo, opts, report);
  } else if (repo || !run.state) {
    const why = repo ? `its repository ${repo} is gone` : "its repository is unknown (no state.json)";
    if (existsSync(ownRoot)) report.kept.push({ what: `worktree folder ${ownRoot}`, why });
  }
  if (existsSync(ownRoot)) {
    // Only empty folders go: what is left in there was kept above, with its reason.
    await rmdir(ownRoot).then(
      () => report.removed.push(`folder ${ownRoot}`),
      () => {},
    );
  }
  if (report.kept.length === 0) {
    // The entry of this run, not of another run that happens to share its id.
    const registered = (await registeredRuns(opts.env)).some(
      (e) => e.run_id === runId && e.run_dir === run.runDir,
    );
    if (registered) {
      await unregisterRun(runId, opts.env);
      report.unregistered = true;
    }
    await dropInlineDocument(run.state, report);
  }
  return report;
}

/**
 * A run on workers also left refs under `refs/termorch/<run>/` on its git remote and keys in
 * Redis (a run that was cancelled, failed before its end, or whose coordinator was killed). The
 * remote and Redis are the run's config's (`redis` also from --redis or $TERMORCH_REDIS_URL).
 */
async function cleanScaleOut(
  state: RunState,
  repo: string,
  opts: { env: Env; redis?: string },
  report: CleanReport,
): Promise<void> {
  let config: Config;
  try {
    config = (await loadConfig(state.config_file ?? undefined, opts.env, state.cwd)).config;
  } catch (error) {
    report.kept.push({ what: "its refs on the git remote and its keys in Redis", why: errorText(error) });
    return;
  }
  const remote = config.git.remote;
  if (remote) {
    try {
      const gone = await deleteRemoteRefsUnder(repo, remote, runRefsOf(state.run_id));
      if (gone > 0) report.removed.push(`${gone} ref(s) on the git remote ${shownRemote(remote)}`);
    } catch (error) {
      report.kept.push({ what: `its refs on the git remote ${shownRemote(remote)}`, why: errorText(error) });
    }
  }
  const url = opts.redis ?? opts.env.TERMORCH_REDIS_URL ?? config.redis;
  if (!url) {
    report.kept.push({
      what: "its keys in Redis",
      why: "no Redis URL: give --redis URL (or set TERMORCH_REDIS_URL, or redis in its config)",
    });
    return;
  }
  const { forgetRunInRedis, shownRedis } = await import("../scale/redis.js");
  try {
    const gone = await forgetRunInRedis(url, state.run_id);
    if (gone > 0) report.removed.push(`${gone} key(s) and job(s) in Redis at ${shownRedis(url)}`);
  } catch (error) {
    report.kept.push({ what: `its keys in Redis at ${shownRedis(url)}`, why: errorText(error) });
  }
}

/** Without state.json, a worktree left in the run's folder still knows its repository. */
async function repoOfWorktrees(ownRoot: string): Promise<string | null> {
  for (const name of await readdir(ownRoot).catch(() => [] as string[])) {
    const dir = await realpath(join(ownRoot, name)).catch(() => null);
    if (!dir) continue;
    const all = await listWorktrees(dir).catch(() => []);
    // git looks upwards for a repository: only one that lists this very folder is its repository.
    if (all[0] && !all[0].bare && all.some((w) => w.path === dir)) return all[0].path;
  }
  return null;
}

async function closeSessions(run: OpsRun, socket: string, env: Env, report: CleanReport): Promise<void> {
  const server = serverFor(socket, env);
  const names = new Set(
    (run.state?.tasks ?? []).flatMap((t) => (t.current.session ? [t.current.session] : [])),
  );
  let panes: Awaited<ReturnType<typeof server.listPanes>>;
  try {
    panes = await server.listPanes();
  } catch (error) {
    report.kept.push({
      what: `sessions on tmux socket ${socket}`,
      why: `tmux could not list them: ${error instanceof Error ? error.message : String(error)}`,
    });
    return;
  }
  const sessions = new Map<string, boolean>();
  for (const p of panes) {
    // Tagged sessions are matched by run id only: another run's session may share a name prefix.
    const ours = p.run === run.runId || (p.run === null && names.has(p.session));
    if (ours) sessions.set(p.session, (sessions.get(p.session) ?? false) || !p.dead);
  }
  for (const [name, live] of sessions) {
    if (await server.killSession(name))
      report.removed.push(`tmux session ${name}${live ? " (its agent was still running)" : ""}`);
  }
  await server.closeIfIdle().catch(() => {});
}

async function removeWorktrees(
  repo: string,
  runId: string,
  ownRoot: string,
  force: boolean,
  report: CleanReport,
): Promise<void> {
  const prefix = runBranchesPrefix(runId);
  const root = await realpath(ownRoot).catch(() => ownRoot);
  const listed = await listWorktrees(repo);
  for (const wt of listed) {
    const inRoot = [ownRoot, root].some((r) => !relative(r, wt.path).startsWith(".."));
    if (!(wt.branch?.startsWith(prefix) || inRoot) || wt.path === repo) continue;
    // Its folder is there without its `.git` file (a removal was interrupted): the prune below
    // forgets it, and what is left of the folder goes with the run folder's other leftovers.
    if (wt.prunable && existsSync(wt.path)) continue;
    if (!force && existsSync(wt.path)) {
      const dirty = await uncommitted(wt.path);
      if (dirty.length > 0) {
        report.kept.push({
          what: `worktree ${wt.path}`,
          why: `uncommitted changes (${dirty.slice(0, 5).join(", ")}${dirty.length > 5 ? `, ${dirty.length - 5} more` : ""}); --force discards them`,
        });
        continue;
      }
    }
    try {
      await removeWorktree(repo, wt.path);
      report.removed.push(`worktree ${wt.path}`);
    } catch (error) {
      // Its agent may have broken the worktree's `.git` file, and git then refuses to remove it:
      // with --force, one in the run's own folder goes as a folder (git forgets it at the prune).
      if (force && inRoot && (await removeWorktreeFolders(repo, [wt.path])).length > 0) {
        report.removed.push(`worktree ${wt.path} (git could not remove it: ${errorText(error)})`);
        continue;
      }
      report.kept.push({
        what: `worktree ${wt.path}`,
        why: `${errorText(error)}${inRoot ? "; --force removes it" : ""}`,
      });
    }
  }
  await git(repo, ["worktree", "prune"], { allowExit: [0, 128] }).catch(() => {});
  // What is left in the run's own folder that git no longer knows as a worktree is what an
  // interrupted removal left (git forgot it at a later prune): termorch's, and nothing of use.
  const known = new Set(listed.filter((w) => !w.prunable).map((w) => w.path));
  for (const name of await readdir(root).catch(() => [] as string[])) {
    const dir = join(root, name);
    if (known.has(dir) || !(await lstat(dir).catch(() => null))?.isDirectory()) continue;
    await rm(dir, { recursive: true, force: true });
    report.removed.push(`folder ${dir} (a worktree whose removal had been interrupted)`);
  }
}

/**
 * Changes in a worktree that removing it would lose. Untracked symlinks are the
 * worktree_include links into the workspace: they are not the task's work.
 */
async function uncommitted(worktree: string): Promise<string[]> {
  const r = await git(worktree, ["status", "--porcelain=v1", "-z", "--untracked-files=normal"], {
    allowExit: [0, 128],
  });
  if (r.exitCode !== 0) return [];
  const out: string[] = [];
  const tokens = r.stdout.split("\0");
  for (let i = 0; i < tokens.length; i++) {
    const entry = tokens[i];
    if (!entry || entry.length < 4) continue;
    const xy = entry.slice(0, 2);
    const path = entry.slice(3);
    if (xy.includes("R") || xy.includes("C")) i++;
    if (xy === "??" && (await lstat(join(worktree, path)).catch(() => null))?.isSymbolicLink()) continue;
    out.push(path);
  }
  return out;
}

/**
 * The refs a redo keeps: each redone task's earlier result (superseded, or back on its branch),
 * failed attempts' work (retry_from), and a halted run's redo base, the start of its artifacts/redo files, which stays while no
 * branch holds it (--force deletes it).
 */
async function deleteRedoRefs(
  repo: string,
  runId: string,
  force: boolean,
  report: CleanReport,
): Promise<void> {
  const base = redoBaseRefOf(runId);
  const r = await git(repo, [
    "for-each-ref",
    "--format=%(refname)",
    redoRefsOf(runId),
    workRefsOf(runId),
    base,
  ]);
  for (const ref of r.stdout.split("\n").filter(Boolean)) {
    if (ref === base && !force) {
      const held = await git(repo, ["for-each-ref", "--count=1", "--contains", ref, "refs/heads/"]);
      if (held.stdout.trim() === "") {
        report.kept.push({
          what: `ref ${ref}`,
          why: "the start_commit of the run's artifacts/redo/*.json files, which no branch holds yet (--force deletes it)",
        });
        continue;
      }
    }
    await git(repo, ["update-ref", "-d", ref]);
    report.removed.push(`ref ${ref}`);
  }
}

async function deleteBranches(
  repo: string,
  runId: string,
  force: boolean,
  report: CleanReport,
  agentRefs: readonly string[] = [],
): Promise<void> {
  const r = await git(repo, ["for-each-ref", "--format=%(refname)", runBranchesPrefix(runId)]);
  const refs = r.stdout.split("\n").filter(Boolean);
  // The integration branch holds every task's work: tried last, so task branches it contains go first.
  refs.sort((a, b) => Number(a.endsWith("/integration")) - Number(b.endsWith("/integration")));
  for (const ref of [...new Set(agentRefs), ...refs]) {
    const branch = ref.startsWith("refs/heads/") ? ref.slice("refs/heads/".length) : ref;
    try {
      const result = await deleteBranch(repo, branch, { force });
      if (result.status === "deleted") report.removed.push(`branch ${branch}`);
      else if (result.status === "kept")
        report.kept.push({
          what: `branch ${branch}`,
          why: result.reason.includes("force")
            ? result.reason.replace(/\(force[^)]*\)/, "(--force deletes it)")
            : result.reason,
        });
    } catch (error) {
      report.kept.push({ what: `branch ${branch}`, why: errorText(error) });
    }
  }
}

/**
 * What `termorch plan`s killed before their end left (src/planning/plan-leftovers.ts): their
 * planners, at work in their sessions on termorch's tmux socket ($TERMORCH_TMUX_SOCKET, else
 * `termorch`), and the copies of the repository in their session folders.
 */
export async function cleanPlannings(env: Env): Promise<{ ended: string[]; removed: string[] }> {
  const server = serverFor(env.TERMORCH_TMUX_SOCKET || "termorch", env);
  let ended: string[] = [];
  try {
    ended = deadPlanners(new Set((await server.listPanes()).map((p) => p.session)));
    if (ended.length > 0) await server.killSessions(ended);
    await server.closeIfIdle();
  } catch {
    // No tmux server on that socket: no planner either.
  }
  return { ended, removed: removeDeadCopies(await plansDirOf()) };
}
