import { fenced } from "../task/feedback.js";

/** Where the planner writes, relative to its plan folder (plan-files.ts reads them there). */
export const PLAN_FILES = {
  assignments: "assignments.json",
  tasks: "tasks",
  milestones: "milestones.md",
  decisions: "decisions.md",
} as const;

/** What the planner of `termorch plan` is told. */
export interface PlannerBrief {
  objective: string;
  /** The assignments file's JSON Schema, generated from zod (compact JSON). */
  schema: string;
  /** The agents a task can name whose CLI is installed here; `planner` among them is the planner's own. */
  agents: readonly string[];
  /** The agent tasks name when the plan has no reason to choose: the planner's. */
  planner: string;
  maxTasks: number;
  /** Absolute path of its plan folder, the one folder it may write in. */
  planDir: string;
  /** Test commands the repository seems to have (package.json's test script, a Makefile's test target…). */
  testCommands: readonly string[];
  /** What was wrong with its last try (a feedback section); null on the first. */
  feedback: string | null;
}

const EXAMPLE = JSON.stringify(
  {
    run_id: "add-auth",
    tasks: [
      {
        id: "auth-model",
        agent: "claude",
        context_path: "tasks/auth-model.md",
        dependencies: [],
        allowed_paths: ["src/auth/**", "test/auth/**"],
        success_criteria: { tests_cmd: "npm test" },
      },
      {
        id: "auth-routes",
        agent: "claude",
        context_path: "tasks/auth-routes.md",
        dependencies: ["auth-model"],
        allowed_paths: ["src/routes/auth.ts", "test/routes/auth.test.ts"],
      },
    ],
    success_criteria: { tests_cmd: "npm test" },
  },
  null,
  2,
);

/** The planner's prompt. Pure: the caller bounds the objective (input/objective-file.ts). */
export function plannerPrompt(b: PlannerBrief): string {
  const at = (name: string): string => `${b.planDir}/${name}`;
  return [
    "# Plan the work of an objective",
    "",
    `(Written by termorch.) You are the planner. Read the objective below and the repository in your working directory, then split the work into tasks that coding agents will do in parallel, each in its own git worktree, and that termorch will merge in dependency order. You write the plan; you do not do the work. Do not change, create or delete any file of the repository: write only in ${b.planDir}. Whatever you change elsewhere is discarded, and the plan is refused.`,
    "",
    "## The objective",
    "",
    ...fenced(b.objective, "markdown"),
    "",
    "## A good plan",
    "",
    "- Independent: a task can be done without waiting on another, unless it names that one in `dependencies`.",
    "- File-disjoint: no two tasks that may run at once (no dependency path between them) change the same files. Give each task the files and folders it expects to own in `allowed_paths` (globs relative to your working folder, such as `src/auth/**`); where two tasks must touch one file, make one depend on the other.",
    "- Sized for one agent: each task is something one coding agent finishes in a single session.",
    `- Verifiable: each task has a clear way to tell it is done. ${b.testCommands.length ? `The repository's tests run with ${b.testCommands.map((c) => `\`${c}\``).join(" or ")}: give the run (or a task) that \`success_criteria.tests_cmd\`, and no other command.` : "termorch found no test command in the repository: set no `tests_cmd`."}`,
    `- At most ${b.maxTasks} tasks, and no more than the objective needs; no dependency cycles.`,
    "",
    "## What to write",
    "",
    `1. ${at(PLAN_FILES.assignments)}: the assignments file, valid against the JSON Schema below.`,
    `   - Each task's \`context_path\` is \`${PLAN_FILES.tasks}/<task id>.md\`, and ${at(`${PLAN_FILES.tasks}/<task id>.md`)} is that task's whole brief: what to do, where, how to tell it is done. Its agent reads nothing else of the plan.`,
    `   - Each task's \`agent\` is one of these (installed here): ${b.agents.join(", ")}. When nothing calls for another, use ${b.planner}.`,
    "   - Use only these fields: `run_id`; `tasks`, each with `id`, `agent`, `context_path`, `dependencies`, `allowed_paths` (required), and optionally `success_criteria` (`tests_cmd`, `required_artifacts`), `timeout_s`, `retries`, `escalation`; and the run's `success_criteria.tests_cmd`. A plan sets no command, `setup_cmd`, `sandbox`, `env`, `conflict_file`, `mode` or `environment` (termorch sets the environment): termorch refuses them. Never write a secret or a credential into any file of the plan.",
    `2. Optionally ${at(PLAN_FILES.milestones)} (the milestones of the work: a summary, the estimated scope, each milestone and the objective items it covers) and ${at(PLAN_FILES.decisions)} (each architectural decision: its context, the options considered, the decision, its consequences).`,
    "",
    "termorch then checks the file exactly as `termorch validate` does, and gives you back every problem it finds until the plan is valid. A plan is never taken half-valid.",
    "",
    "An example of the shape (yours follows the objective):",
    "",
    ...fenced(EXAMPLE, "json"),
    "",
    "## The assignments file's JSON Schema",
    "",
    ...fenced(b.schema, "json"),
    ...(b.feedback === null ? [] : [b.feedback]),
    "",
  ].join("\n");
}
