import type { z } from "zod";
import { InputError, type InputProblem } from "../errors.js";

/** Renders a zod issue path as `tasks[2].dependencies[0]`. */
export function jsonPath(path: readonly PropertyKey[]): string {
  let out = "";
  for (const key of path) {
    if (typeof key === "number") out += `[${key}]`;
    else out += out ? `.${String(key)}` : String(key);
  }
  return out || "(root)";
}

/**
 * Validates `data` against `schema` once, at the edge; on failure throws an InputError that
 * names the file, the field (JSON path) and, when the path is inside `tasks[i]`, the task id.
 */
export function parseWith<S extends z.ZodType>(schema: S, data: unknown, file: string): z.infer<S> {
  const result = schema.safeParse(data);
  if (result.success) return result.data;
  throw new InputError(schemaProblems(result.error, data, file));
}

/** A failed validation's issues as problems naming the file, the field and the task. */
export function schemaProblems(error: z.ZodError, data: unknown, file: string): InputProblem[] {
  return error.issues.map((issue) => {
    const p: InputProblem = { file, field: jsonPath(issue.path), message: describeIssue(issue) };
    const task = taskIdAt(data, issue.path);
    if (task) p.task = task;
    return p;
  });
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === "unrecognized_keys") {
    return `unknown key${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${k}"`).join(", ")} (check the spelling; unknown keys are not ignored)`;
  }
  return issue.message;
}

function taskIdAt(data: unknown, path: readonly PropertyKey[]): string | undefined {
  if (path[0] !== "tasks" || typeof path[1] !== "number") return undefined;
  const tasks = (data as { tasks?: unknown[] } | null)?.tasks;
  const task = Array.isArray(tasks) ? tasks[path[1]] : undefined;
  const id = (task as { id?: unknown } | undefined)?.id;
  return typeof id === "string" ? id : `#${path[1]}`;
}
