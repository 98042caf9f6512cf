/**
 * What a planner may set in the assignments it writes. The planner runs read-only, and what it
 * writes may be run at once (`plan --run`): it names tasks, their agents, briefs, dependencies,
 * the files they own, their bounds and checks; it runs no command of its own choosing (a
 * `command`, a `setup_cmd`, a `tests_cmd` that is not the repository's), loosens no sandbox,
 * reads no file into a prompt (`conflict_file`), passes no variable. Pure.
 */

const TOP = new Set(["$schema", "run_id", "tasks", "success_criteria"]);
const TASK = new Set([
  "id",
  "agent",
  "context_path",
  "dependencies",
  "allowed_paths",
  "success_criteria",
  "timeout_s",
  "retries",
  "escalation",
]);
const CRITERIA = new Set(["tests_cmd", "required_artifacts"]);

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Every field of the planner's assignments that is not a planner's to set, and every tests_cmd
 * that is none of `testCommands` (the repository's, as termorch found them), in the words the
 * planner is told. The schema's own checks are `validate`'s.
 */
export function plannerFieldProblems(
  assignments: Record<string, unknown>,
  testCommands: readonly string[],
): string[] {
  const problems: string[] = [];
  const refuse = (where: string, key: string): void => {
    problems.push(
      `${where}${key}: not a planner's to set (a plan runs no command, loosens no sandbox and passes no variable a planner chose); leave it out`,
    );
  };
  const criteria = (where: string, c: unknown): void => {
    if (!isObject(c)) return;
    for (const key of Object.keys(c)) if (!CRITERIA.has(key)) refuse(`${where}success_criteria.`, key);
    const cmd = c.tests_cmd;
    if (typeof cmd === "string" && !testCommands.includes(cmd))
      problems.push(
        `${where}success_criteria.tests_cmd: "${cmd}" is none of the repository's test commands (${testCommands.length ? testCommands.map((t) => `"${t}"`).join(", ") : "termorch found none"}); use one of them, or leave it out`,
      );
  };
  for (const key of Object.keys(assignments)) if (!TOP.has(key)) refuse("", key);
  criteria("", assignments.success_criteria);
  const tasks = Array.isArray(assignments.tasks) ? assignments.tasks : [];
  tasks.forEach((t, i) => {
    if (!isObject(t)) return;
    const where = `tasks[${i}].`;
    for (const key of Object.keys(t)) if (!TASK.has(key)) refuse(where, key);
    criteria(where, t.success_criteria);
    const expected = typeof t.id === "string" ? `tasks/${t.id}.md` : null;
    if (expected && t.context_path !== expected)
      problems.push(`${where}context_path: must be "${expected}", the task's brief in the plan folder`);
  });
  return problems;
}
