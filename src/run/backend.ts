import { isAbsolute } from "node:path";
import { EnvironmentError, InputError } from "../errors.js";
import { remoteProblem, runRefsOf, shownRemote } from "../git/remote.js";
import type { RunInput } from "../input/assignments-file.js";
import type { RemoteBackend, TaskHosts } from "../runner/task-hosts.js";

/** Where a run's tasks run: this host's tmux, or workers reached through BullMQ on Redis. */
export type BackendKind = "local" | "bullmq";

/** What the caller chose on its command line (it wins over the config), and how it reaches the workers. */
export interface BackendChoice {
  kind?: BackendKind;
  /** Redis URL (--redis); else the config's `redis`. */
  redis?: string;
  /** Connects to the workers' queue; the caller owns what it answers (and closes it). */
  connect?: (redisUrl: string) => Promise<TaskHosts>;
}

/** The run's backend kind: the command line's, else the config's, else local. */
export function backendKindOf(
  input: Pick<RunInput, "config">,
  choice: BackendChoice | undefined,
): BackendKind {
  return choice?.kind ?? input.config.backend ?? "local";
}

/**
 * merge.on_conflict "redo" and on_gate_failure "bisect_and_fix" run new attempts of finished
 * tasks on this host, in the merge stage, in the task's local worktree: not yet with workers,
 * whose tasks run in theirs (refused before anything starts, exit 2). "bisect" runs only the
 * run-level gate, here, as the run-level gates always do: allowed.
 */
export function checkMergePolicy(
  input: Pick<RunInput, "config" | "configFile" | "file" | "assignments">,
  kind: BackendKind,
): void {
  if (kind !== "bullmq") return;
  const refused = [
    {
      key: "on_conflict",
      value: "redo",
      instead: 'on_conflict "halt" (then run the artifacts/redo/<task>.json files it writes)',
    },
    {
      key: "on_gate_failure",
      value: "bisect_and_fix",
      instead: 'on_gate_failure "bisect" (it names the task to fix)',
    },
  ] as const;
  const problems = [];
  const instead = [];
  for (const r of refused) {
    const fromAssignments = input.assignments.mode.merge?.[r.key];
    if ((fromAssignments ?? input.config.merge?.[r.key]) !== r.value) continue;
    problems.push({
      file: fromAssignments ? input.file : (input.configFile ?? input.file),
      field: `${fromAssignments ? "mode.merge" : "merge"}.${r.key}`,
      message: `${r.key} "${r.value}" is not supported with backend bullmq yet (its new attempts run on the coordinator's host)`,
    });
    instead.push(r.instead);
  }
  // A task's result is judged on its worker, where no decision the coordinator's folder gets is read.
  for (const [i, t] of input.assignments.tasks.entries()) {
    const at = typeof t.approval === "string" ? t.approval : t.approval?.at;
    if (at !== "result") continue;
    problems.push({
      file: input.file,
      field: `tasks[${i}].approval`,
      task: t.id,
      message: `approval "result" is not supported with backend bullmq yet (the task's gates run on its worker)`,
    });
    instead.push('approval "start", or merge.approval for the whole run');
  }
  if (problems.length === 0) return;
  throw new InputError(problems, `Use ${[...new Set(instead)].join(" and ")} with workers, or run locally.`);
}

/**
 * The remote backend of a run whose tasks go to workers, connected (an unreachable Redis is an
 * environment error: exit 2, before anything starts); null for a local run. A missing Redis URL
 * or git remote is an error of the input.
 */
export async function connectBackend(
  input: Pick<RunInput, "config" | "configFile" | "file">,
  kind: BackendKind,
  choice: BackendChoice | undefined,
): Promise<RemoteBackend | null> {
  if (kind === "local") return null;
  const where = input.configFile ?? "the config";
  const redis = choice?.redis ?? input.config.redis;
  const remote = input.config.git.remote;
  const problems = [];
  if (!redis)
    problems.push({
      message: "backend bullmq needs a Redis URL: give --redis URL or set `redis` in the config",
    });
  if (!remote)
    problems.push({
      file: where,
      field: "git.remote",
      message:
        "backend bullmq needs a git remote every host can reach: set git.remote to a bare repository's absolute path or URL",
    });
  else if (!isRemote(remote))
    problems.push({
      file: where,
      field: "git.remote",
      message: `"${remote}" is neither an absolute path nor a URL (e.g. /srv/termorch.git, ssh://host/srv/termorch.git)`,
    });
  if (problems.length > 0) throw new InputError(problems);
  if (!choice?.connect) throw new EnvironmentError("this termorch was built without the bullmq backend");
  return { hosts: await choice.connect(redis!), remote: remote! };
}

/** An absolute path, a URL, or git's scp-like `host:path`. */
export function isRemote(remote: string): boolean {
  return (
    isAbsolute(remote) || /^[a-z][a-z0-9+.-]*:\/\//i.test(remote) || /^[^/:@]+@?[^/:]*:[^/]/.test(remote)
  );
}

/**
 * The git remote of a run on workers, checked before anything of the run exists (exit 2): there,
 * bare, readable and taking pushes from the workspace.
 */
export async function checkRemote(
  input: Pick<RunInput, "config" | "configFile" | "workspace" | "runId">,
  backend: RemoteBackend,
): Promise<void> {
  const problem = await remoteProblem(input.workspace, backend.remote, `${runRefsOf(input.runId)}probe`);
  if (problem === null) return;
  throw new EnvironmentError(
    `the git remote ${shownRemote(backend.remote)} (git.remote in ${input.configFile ?? "the config"}) cannot serve the workers: ${problem}. Give git.remote a bare repository every host can reach and push to (create one with: git init --bare PATH).`,
  );
}
