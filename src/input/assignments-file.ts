import { lstatSync, statSync } from "node:fs";
import { basename, dirname, extname, resolve } from "node:path";
import { z } from "zod";
import { agentFor, type ResolvedAgent, type TaskAgent, taskAgents } from "../agent/command.js";
import {
  Assignments,
  type Budget,
  Environment,
  RUN_ID_PATTERN,
  SuccessCriteria,
  Task,
} from "../contract/assignments.js";
import type { Config } from "../contract/config.js";
import { schemaProblems } from "../contract/parse.js";
import { ReviewSetting, reviewAsked } from "../contract/review.js";
import { InputError, type InputProblem } from "../errors.js";
import { compactTimestamp } from "../fs/log-names.js";
import { resolveInside } from "../fs/paths.js";
import { graphProblems, type PlanNode } from "../plan/graph.js";
import { costKnown, priceOf } from "../spend/pricing.js";
import type { LoadedConfig } from "./config-file.js";
import { readJsonFileWithHash } from "./json-file.js";

/** A task after validation: everything the runner needs, resolved. */
export interface ResolvedTask {
  task: Task;
  /** The agents its attempts run, in order: its own, then its escalation list. */
  agents: readonly [RunAgent, ...RunAgent[]];
  /** Absolute path of the context file in the workspace. */
  contextPath: string;
  /** Absolute path of its conflict_file, or null. */
  conflictFile: string | null;
}

/** One of a task's agents, defined. */
export type RunAgent = TaskAgent & { agent: ResolvedAgent };

/** Where a task's input names one of its agents (`tasks[i].agent`, `tasks[i].escalation[j]`). */
export function agentField(taskIndex: number, a: Pick<TaskAgent, "escalation">): string {
  if (a.escalation?.list === "fallback")
    return `tasks[${taskIndex}].rate_limit.fallback[${a.escalation.index}]`;
  if (a.escalation?.list === "review") return `tasks[${taskIndex}].success_criteria.review`;
  return a.escalation?.list === "task"
    ? `tasks[${taskIndex}].escalation[${a.escalation.index}]`
    : `tasks[${taskIndex}].agent`;
}

/** A task's agent as messages name it: `agent "x"`, or which escalation agent it is. */
export function agentLabel(a: Pick<TaskAgent, "name" | "escalation">, taskAgent: string): string {
  if (a.escalation === null) return `agent "${a.name}"`;
  if (a.escalation.list === "fallback") return `agent "${a.name}" (its rate limit's fallback)`;
  if (a.escalation.list === "review") return `agent "${a.name}" (its reviewer)`;
  const whose =
    a.escalation.list === "task" ? "its escalation" : `agent "${taskAgent}"'s escalation in the config`;
  return `agent "${a.name}" (attempt ${a.escalation.index + 2}, from ${whose})`;
}

/** A task's agents when every one of them is defined; null otherwise. */
export function allDefined(agents: readonly TaskAgent[]): readonly [RunAgent, ...RunAgent[]] | null {
  const [first, ...rest] = agents.filter((a): a is RunAgent => a.agent !== undefined);
  return first && rest.length === agents.length - 1 ? [first, ...rest] : null;
}

/** An assignments file that passed every check of the validate step (docs/ARCHITECTURE.md). */
export interface RunInput {
  file: string;
  /** SHA-256 of the file as validated: a resume refuses a file that changed since. */
  sha256: string;
  /** The config file the run uses, or null when none was found. */
  configFile: string | null;
  runId: string;
  assignments: Assignments;
  workspace: string;
  tasks: ResolvedTask[];
  config: Config;
  /** The reviewer of the run's integration (`merge.review`); null: none. */
  mergeReviewer: RunAgent | null;
}

/** Reads, parses and checks an assignments file; throws one InputError listing every problem. */
export async function loadAssignments(
  file: string,
  loaded: LoadedConfig,
  nowMs: number,
  /** Folder `workspace_dir` is relative to; default: the file's own folder. */
  baseDir?: string,
): Promise<RunInput> {
  const config = loaded.config;
  const abs = resolve(file);
  const read = await readJsonFileWithHash(abs, "assignments file");
  const parsed = Assignments.safeParse(read.data);
  // A file that fails the schema is still checked wherever its parts can be (the graph, the
  // tasks that parsed, the workspace), so that one pass lists every problem.
  const view = parsed.success ? wholeView(parsed.data) : partialView(read.data);
  // An invalid config leaves the agents unknown; everything else in the file is still checked.
  const configProblems = loaded.problems ?? [];
  const problems: InputProblem[] = [
    ...configProblems,
    ...(parsed.success ? [] : schemaProblems(parsed.error, read.data, abs)),
  ];
  problems.push(...graphProblems(view.nodes, abs));
  const at = (p: Omit<InputProblem, "file">): void => {
    problems.push({ file: abs, ...p });
  };

  let workspace: string | undefined;
  if (view.workspaceDir !== undefined) {
    workspace = resolve(baseDir ?? dirname(abs), view.workspaceDir);
    if (!isDirectory(workspace)) {
      at({
        field: "environment.workspace_dir",
        message: `workspace "${view.workspaceDir}" (${workspace}) is not an existing directory`,
      });
      workspace = undefined;
    }
  }

  const resolved = new Map<string, ReturnType<typeof resolveInside>>();
  const found = new Map<string, boolean>();
  const existing = (path: string): boolean => {
    let there = found.get(path);
    if (there === undefined) {
      there = exists(path);
      found.set(path, there);
    }
    return there;
  };
  const inside = (
    field: string,
    task: string | undefined,
    userPath: string,
    mustExist: boolean,
  ): string | undefined => {
    // Paths in a workspace that is not there cannot be checked (that problem is reported).
    if (workspace === undefined) return undefined;
    // Thousands of tasks often share one context file: resolve (realpath) and stat each path once.
    let result = resolved.get(userPath);
    if (!result) {
      result = resolveInside(workspace, userPath);
      resolved.set(userPath, result);
    }
    const where = task === undefined ? { field } : { field, task };
    if ("error" in result) return void at({ ...where, message: result.error });
    if (mustExist && !existing(result.path))
      return void at({ ...where, message: `"${userPath}" does not exist in the workspace (${result.path})` });
    return result.path;
  };
  const globInside = (field: string, task: string | undefined, pattern: string): void => {
    // Globs are checked on their literal prefix; the gate itself only ever looks inside the workspace.
    const prefix = pattern.split(/[*?[{]/)[0] ?? "";
    if (pattern.startsWith("/") || prefix.split("/").includes("..")) {
      at({
        ...(task === undefined ? { field } : { field, task }),
        message: `"${pattern}" must be a path inside the workspace (no absolute paths or "..")`,
      });
    }
  };

  const tasks: ResolvedTask[] = [];
  for (const t of view.tasks) {
    const i = t.index;
    const contextPath =
      t.contextPath === undefined
        ? undefined
        : inside(`tasks[${i}].context_path`, t.label, t.contextPath, true);
    // With a malformed `command` it is unknown whether the registry would be asked at all.
    const agents =
      t.agent === undefined || t.commandMalformed
        ? undefined
        : taskAgents(
            {
              agent: t.agent,
              ...(t.command ? { command: t.command } : {}),
              ...(t.escalation ? { escalation: t.escalation } : {}),
              ...(t.fallback ? { rate_limit: { fallback: t.fallback } } : {}),
              review: reviewAsked(t.review, view.review, config.defaults.review)?.agent,
            },
            config,
          );
    const known = Object.keys(config.agents);
    const definedAre = known.length
      ? `defined agents: ${known.join(", ")}`
      : loaded.file
        ? `the config file ${loaded.file} defines no agents`
        : "no config file was found, so no agents are defined: pass --config or set TERMORCH_CONFIG";
    for (const a of configProblems.length === 0 ? (agents ?? []) : []) {
      const field = agentField(i, a);
      if (a.escalation !== null && a.escalation.list !== "review" && a.name === t.agent)
        at({
          field,
          task: t.label,
          message:
            a.escalation.list === "fallback"
              ? `"${a.name}" is the task's own agent: a rate limit's fallback names other agents (to wait for the limit, use "on": "wait")`
              : `"${a.name}" is the task's own agent: an escalation names other agents; to run it again, raise "retries"`,
        });
      else if (!a.agent)
        at({
          field,
          task: t.label,
          message:
            a.escalation === null
              ? `unknown agent "${a.name}" (${definedAre}); define it in the config's "agents" or give the task an explicit "command"`
              : `unknown agent "${a.name}" in its ${{ fallback: "rate limit's fallback", review: "success_criteria.review", task: "escalation", agent: "escalation" }[a.escalation.list]} (${definedAre}); define it in the config's "agents" or name a preset`,
        });
    }
    for (const [j, p] of (t.allowedPaths ?? []).entries())
      globInside(`tasks[${i}].allowed_paths[${j}]`, t.label, p);
    for (const [j, p] of (t.requiredArtifacts ?? []).entries()) {
      globInside(`tasks[${i}].success_criteria.required_artifacts[${j}]`, t.label, p);
    }
    // These only mean something for an agent whose screen termorch watches.
    if (t.task && !t.task.interactive)
      for (const key of ["done_when", "waiting_after_s"] as const)
        if (t.task[key] !== undefined)
          at({
            field: `tasks[${i}].${key}`,
            task: t.label,
            message: `"${key}" applies to interactive tasks only; add "interactive": true or remove it`,
          });
    const conflictFile =
      t.task?.conflict_file === undefined ? null : resolve(dirname(abs), t.task.conflict_file);
    if (conflictFile !== null) {
      const problem = conflictFileProblem(conflictFile);
      if (problem) at({ field: `tasks[${i}].conflict_file`, task: t.label, message: problem });
    }
    const defined = agents && allDefined(agents);
    if (t.task && contextPath && defined)
      tasks.push({ task: t.task, agents: defined, contextPath, conflictFile });
  }
  const include = view.worktreeInclude;
  if (include && workspace !== undefined) {
    // The config's default includes join in where they exist in this workspace.
    for (const p of config.defaults.worktree_include) {
      if (!include.includes(p) && exists(resolve(workspace, p))) include.push(p);
    }
    include.forEach((p, j) => {
      inside(`environment.worktree_include[${j}]`, undefined, p, true);
    });
  }
  // A copy that is missing would give every agent a different environment than asked for.
  (view.worktreeCopy ?? []).forEach((p, j) => {
    inside(`environment.worktree_copy[${j}]`, undefined, p, true);
  });
  (view.requiredArtifacts ?? []).forEach((p, j) => {
    globInside(`success_criteria.required_artifacts[${j}]`, undefined, p);
  });
  const mergeReviewer = parsed.success ? mergeReviewerOf(parsed.data, config) : null;
  if (mergeReviewer && !mergeReviewer.agent && configProblems.length === 0)
    at({
      field: "mode.merge.review",
      message: `unknown agent "${mergeReviewer.name}" (${Object.keys(config.agents).length ? `defined agents: ${Object.keys(config.agents).join(", ")}` : "the config defines no agents"}); define it in the config's "agents" or name a preset`,
    });
  if (parsed.success) usdBudgetProblems(parsed.data.environment.resource_limits, tasks, config).forEach(at);
  if (!parsed.success || workspace === undefined || problems.length > 0) {
    throw new InputError(problems, undefined, view.runId ?? null);
  }

  const assignments = parsed.data;
  return {
    file: abs,
    sha256: read.sha256,
    configFile: loaded.file,
    runId: assignments.run_id ?? defaultRunId(abs, nowMs),
    assignments,
    workspace,
    tasks,
    config,
    mergeReviewer: mergeReviewer?.agent ? (mergeReviewer as RunAgent) : null,
  };
}

/** The reviewer `merge.review` names (the assignments', else the config's), resolved; null: none asked. */
function mergeReviewerOf(a: Assignments, config: Config): TaskAgent | null {
  const asked = reviewAsked(a.mode.merge?.review, config.merge?.review);
  if (asked === null) return null;
  return {
    name: asked.agent,
    agent: agentFor({ agent: asked.agent }, config),
    escalation: { index: 0, list: "review" },
  };
}

const MAX_CONFLICT_FILE_BYTES = 1024 * 1024;

/** Why a conflict_file cannot be read into a prompt, or null. */
function conflictFileProblem(path: string): string | null {
  const st = lstatSync(path, { throwIfNoEntry: false });
  if (!st) return `"${path}" does not exist`;
  if (!st.isFile()) return `"${path}" is not a regular file (a link or a folder is not read)`;
  if (st.size > MAX_CONFLICT_FILE_BYTES) return `"${path}" is larger than 1 MiB`;
  return null;
}

/** What the checks after the schema look at: the whole file, or whichever parts of it are valid. */
interface InputView {
  runId?: string;
  /** Tasks with a string id, for the graph checks. */
  nodes: Array<PlanNode & { index: number }>;
  tasks: TaskView[];
  workspaceDir?: string;
  /** The assignments' own list (default includes are added to it). */
  worktreeInclude?: string[];
  worktreeCopy?: string[];
  requiredArtifacts?: string[];
  /** The run's `success_criteria.review`. */
  review?: ReviewSetting;
}

interface TaskView {
  /** Place in the file's task list. */
  index: number;
  /** The task as messages name it: its id, or `#index` without one. */
  label: string;
  contextPath?: string;
  agent?: string;
  command?: string[];
  escalation?: string[];
  /** Its rate_limit's fallback list, when it has one of its own. */
  fallback?: string[];
  commandMalformed: boolean;
  allowedPaths?: string[];
  requiredArtifacts?: string[];
  /** Its own `success_criteria.review`. */
  review?: ReviewSetting;
  /** The whole task, when the whole file passed the schema. */
  task?: Task;
}

function wholeView(a: Assignments): InputView {
  return {
    ...(a.run_id === undefined ? {} : { runId: a.run_id }),
    nodes: a.tasks.map((t, index) => ({ id: t.id, dependencies: t.dependencies, index })),
    tasks: a.tasks.map((task, index) => ({
      index,
      label: task.id,
      contextPath: task.context_path,
      agent: task.agent,
      ...(task.command ? { command: task.command } : {}),
      ...(task.escalation ? { escalation: task.escalation } : {}),
      ...(task.rate_limit ? { fallback: task.rate_limit.fallback } : {}),
      commandMalformed: false,
      ...(task.allowed_paths ? { allowedPaths: task.allowed_paths } : {}),
      requiredArtifacts: task.success_criteria?.required_artifacts ?? [],
      ...(task.success_criteria?.review === undefined ? {} : { review: task.success_criteria.review }),
      task,
    })),
    workspaceDir: a.environment.workspace_dir,
    worktreeInclude: a.environment.worktree_include,
    worktreeCopy: a.environment.worktree_copy,
    requiredArtifacts: a.success_criteria.required_artifacts,
    ...(a.success_criteria.review === undefined ? {} : { review: a.success_criteria.review }),
  };
}

/** The valid parts of a file that failed the schema, each checked with its own part of the schema. */
function partialView(data: unknown): InputView {
  const part = <S extends z.ZodType>(schema: S, value: unknown): z.infer<S> | undefined => {
    const result = schema.safeParse(value);
    return result.success ? result.data : undefined;
  };
  const root = record(data);
  const environment = record(root.environment);
  const view: InputView = { nodes: [], tasks: [] };
  const assign = <K extends keyof InputView>(key: K, value: InputView[K] | undefined): void => {
    if (value !== undefined) view[key] = value;
  };
  assign("runId", part(Assignments.shape.run_id, root.run_id));
  assign("workspaceDir", part(Environment.shape.workspace_dir, environment.workspace_dir));
  assign("worktreeInclude", part(Environment.shape.worktree_include, environment.worktree_include));
  assign("worktreeCopy", part(Environment.shape.worktree_copy, environment.worktree_copy));
  assign(
    "requiredArtifacts",
    part(SuccessCriteria.shape.required_artifacts, record(root.success_criteria).required_artifacts),
  );
  assign("review", part(ReviewSetting, record(root.success_criteria).review));
  (Array.isArray(root.tasks) ? root.tasks : []).forEach((raw: unknown, index) => {
    const t = record(raw);
    const id = typeof t.id === "string" ? t.id : undefined;
    if (id !== undefined) {
      const deps = Array.isArray(t.dependencies) ? t.dependencies : [];
      view.nodes.push({ id, dependencies: deps.filter((d): d is string => typeof d === "string"), index });
    }
    const command = part(Task.shape.command, t.command);
    const task: TaskView = {
      index,
      label: id ?? `#${index}`,
      commandMalformed: t.command !== undefined && !command,
    };
    const set = <K extends keyof TaskView>(key: K, value: TaskView[K] | undefined): void => {
      if (value !== undefined) task[key] = value;
    };
    set("contextPath", part(Task.shape.context_path, t.context_path));
    set("agent", part(Task.shape.agent, t.agent));
    set("command", command);
    // Its names are still checked when the list repeats one (the schema says that).
    set("escalation", part(z.array(z.string().min(1)), t.escalation));
    set("fallback", part(z.array(z.string().min(1)), record(t.rate_limit).fallback));
    set("allowedPaths", part(Task.shape.allowed_paths, t.allowed_paths));
    set(
      "requiredArtifacts",
      part(SuccessCriteria.shape.required_artifacts, record(t.success_criteria).required_artifacts),
    );
    set("review", part(ReviewSetting, record(t.success_criteria).review));
    view.tasks.push(task);
  });
  return view;
}

function record(value: unknown): Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : {};
}

/** The file's base name plus a UTC timestamp, cut to the run id pattern. */
export function defaultRunId(file: string, nowMs: number): string {
  const base =
    basename(file, extname(file))
      .replace(/[^A-Za-z0-9_-]/g, "_")
      .replace(/^[_-]+/, "") || "run";
  const id = `${base.slice(0, 40)}-${compactTimestamp(nowMs)}`;
  return RUN_ID_PATTERN.test(id) ? id : `run-${compactTimestamp(nowMs)}`;
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function exists(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch {
    return false;
  }
}

/**
 * A budget in USD over an agent whose cost termorch cannot know (its CLI reports none, and the
 * config's `prices` have none for it or its model) could never be kept: refused, naming the
 * budget, the agent and what to add.
 */
function usdBudgetProblems(
  run: Budget,
  tasks: readonly ResolvedTask[],
  config: Config,
): Omit<InputProblem, "file">[] {
  const found: Omit<InputProblem, "file">[] = [];
  for (const [i, r] of tasks.entries()) {
    const own = r.task.budget ?? r.agents[0].agent.budget;
    // The budget that asks for it: the task's own, its agent entry's, or the run's.
    const field =
      r.task.budget?.max_cost_usd !== undefined
        ? `tasks[${i}].budget.max_cost_usd`
        : own?.max_cost_usd !== undefined
          ? `tasks[${i}].agent (its config entry's budget.max_cost_usd)`
          : run.max_cost_usd !== undefined
            ? "environment.resource_limits.max_cost_usd"
            : null;
    if (field === null) continue;
    for (const a of r.agents) {
      const price = priceOf(config.prices, { name: a.name, model: a.agent.model });
      if (costKnown({ output: a.agent.output, interactive: r.task.interactive === true }, price)) continue;
      found.push({
        field,
        task: r.task.id,
        message: `a budget in USD cannot be kept: ${agentLabel(a, r.task.agent)} reports no cost${r.task.interactive ? " in an interactive session" : ""} and the config's "prices" have none for "${a.name}"${a.agent.model ? ` or its model "${a.agent.model}"` : ""}; add "prices": {"${a.name}": {"input": <USD per million>, "output": <USD per million>}} to the config, or give the budget in max_tokens`,
      });
    }
  }
  return found;
}
