import { statSync } from "node:fs";
import { basename, dirname, extname, resolve } from "node:path";
import { agentFor } from "../agent/command.js";
import { Assignments, RUN_ID_PATTERN, type Task } from "../contract/assignments.js";
import type { AgentSpec, Config } from "../contract/config.js";
import { parseWith } from "../contract/parse.js";
import { InputError, type InputProblem } from "../errors.js";
import { compactTimestamp } from "../fs/log-names.js";
import { resolveInside } from "../fs/paths.js";
import { graphProblems } from "../plan/graph.js";
import type { LoadedConfig } from "./config-file.js";
import { readJsonFileWithHash } from "./json-file.js";

/** A task after validation: everything the runner needs, resolved. */
export interface ResolvedTask {
  task: Task;
  agent: AgentSpec;
  /** Absolute path of the context file in the workspace. */
  contextPath: string;
}

/** An assignments file that passed every check of DESIGN section 1. */
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
  const assignments = parseWith(Assignments, read.data, abs);
  const problems: InputProblem[] = graphProblems(assignments.tasks, abs);
  const at = (p: Omit<InputProblem, "file">): void => {
    problems.push({ file: abs, ...p });
  };

  const workspace = resolve(baseDir ?? dirname(abs), assignments.environment.workspace_dir);
  if (!isDirectory(workspace)) {
    at({
      field: "environment.workspace_dir",
      message: `workspace "${assignments.environment.workspace_dir}" (${workspace}) is not an existing directory`,
    });
    throw new InputError(problems);
  }

  const resolved = new Map<string, ReturnType<typeof resolveInside>>();
  const inside = (
    field: string,
    task: string | undefined,
    userPath: string,
    mustExist: boolean,
  ): string | undefined => {
    // Thousands of tasks often share one context file: resolve (realpath) each path once.
    let result = resolved.get(userPath);
    if (!result) {
      result = resolveInside(workspace, userPath);
      resolved.set(userPath, result);
    }
    const where = task === undefined ? { field } : { field, task };
    if ("error" in result) return void at({ ...where, message: result.error });
    if (mustExist && !exists(result.path))
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
  assignments.tasks.forEach((task, i) => {
    const contextPath = inside(`tasks[${i}].context_path`, task.id, task.context_path, true);
    const agent = agentFor(task, config);
    if (!agent) {
      const known = Object.keys(config.agents);
      at({
        field: `tasks[${i}].agent`,
        task: task.id,
        message: `unknown agent "${task.agent}" (${known.length ? `defined agents: ${known.join(", ")}` : "no agents are defined: pass --config or set TERMORCH_CONFIG"}); define it in the config's "agents" or give the task an explicit "command"`,
      });
    }
    for (const [j, p] of (task.allowed_paths ?? []).entries())
      globInside(`tasks[${i}].allowed_paths[${j}]`, task.id, p);
    for (const [j, p] of (task.success_criteria?.required_artifacts ?? []).entries()) {
      globInside(`tasks[${i}].success_criteria.required_artifacts[${j}]`, task.id, p);
    }
    if (contextPath && agent) tasks.push({ task, agent, contextPath });
  });
  // The config's default includes join in where they exist in this workspace.
  for (const p of config.defaults.worktree_include) {
    if (!assignments.environment.worktree_include.includes(p) && exists(resolve(workspace, p))) {
      assignments.environment.worktree_include.push(p);
    }
  }
  assignments.environment.worktree_include.forEach((p, j) => {
    inside(`environment.worktree_include[${j}]`, undefined, p, true);
  });
  assignments.success_criteria.required_artifacts.forEach((p, j) => {
    globInside(`success_criteria.required_artifacts[${j}]`, undefined, p);
  });
  if (problems.length > 0) throw new InputError(problems);

  return {
    file: abs,
    sha256: read.sha256,
    configFile: loaded.file,
    runId: assignments.run_id ?? defaultRunId(abs, nowMs),
    assignments,
    workspace,
    tasks,
    config,
  };
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
