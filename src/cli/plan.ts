import type { Command } from "commander";
import type { PlanAnswer, PlanTry } from "../contract/plan.js";
import { collisionText } from "../plan/collisions.js";
import { DEFAULT_MAX_TASKS, DEFAULT_PLAN_TRIES, planObjective } from "../planning/plan-objective.js";
import { budgetOf, count, usd } from "../spend/budget.js";
import type { Io } from "./io.js";
import { positiveInt, positiveNumber } from "./positive-int.js";
import { stopSignal } from "./stop-signal.js";

interface PlanFlags {
  agent?: string;
  out?: string;
  maxTasks: number;
  tries: number;
  timeout?: number;
  maxCostUsd?: number;
  maxTokens?: number;
  workspace?: string;
  force?: boolean;
  env: string[];
  config?: string;
  run?: boolean;
  json?: boolean;
}

/**
 * `termorch plan OBJECTIVE.md`: a planner agent writes the assignments file (src/planning/); the
 * plan is shown, and with --run handed to `run` (`runFile`: the run command as `termorch run`
 * runs it, its --json the report's).
 */
export function registerPlanCommand(
  program: Command,
  io: Io,
  setCode: (code: number) => void,
  runFile: (file: string, o: { config?: string; json?: boolean }) => Promise<number>,
): void {
  program
    .command("plan")
    .description(
      "have a planner agent write assignments.json from an objective (read-only), validated as `validate` does, its problems fed back until it is; show the plan",
    )
    .argument("<objective>", "OBJECTIVE.md: what you want done, in words")
    .option(
      "--agent <name>",
      "the planner: a preset or config agent (default: the config's defaults.planner)",
    )
    .option("--out <file>", "the assignments file to write (default: assignments.json in the workspace)")
    .option("--max-tasks <n>", "at most this many tasks", positiveInt, DEFAULT_MAX_TASKS)
    .option("--tries <n>", "tries the planner gets to write a valid plan", positiveInt, DEFAULT_PLAN_TRIES)
    .option("--timeout <s>", "seconds each try may take (default: the agent's timeout)", positiveInt)
    .option(
      "--max-cost-usd <usd>",
      "USD the planner's tries may spend: no try starts once it is spent (default: its config entry's budget)",
      positiveNumber,
    )
    .option("--max-tokens <n>", "tokens (input and output) the planner's tries may use", positiveInt)
    .option("--workspace <dir>", "the repository to plan for (default: the current folder)")
    .option("--force", "replace an assignments file and plan folder that are there already")
    .option(
      "--env <name>",
      "a variable of this environment the planner gets (its API key), by name; the plan's env_vars list it too (repeatable)",
      (v: string, all: string[]) => [...all, v],
      [] as string[],
    )
    .option("--config <file>", "config file")
    .option("--run", "run the plan once it is valid, as termorch run does")
    .option("--json", "print the plan as JSON (with --run: the run's report, as termorch run --json)")
    .option("--debug", "stack traces")
    .action(async (objective: string, o: PlanFlags) => {
      const stop = stopSignal(io, { readerGone: false });
      let answer: PlanAnswer;
      try {
        answer = await planObjective({
          objectiveFile: objective,
          maxTasks: o.maxTasks,
          tries: o.tries,
          ...(o.agent ? { agent: o.agent } : {}),
          ...(o.out ? { out: o.out } : {}),
          ...(o.timeout ? { timeoutS: o.timeout } : {}),
          budget: budgetOf({ max_cost_usd: o.maxCostUsd, max_tokens: o.maxTokens }),
          ...(o.workspace ? { workspace: o.workspace } : {}),
          ...(o.force ? { force: true } : {}),
          envVars: o.env,
          ...(o.config ? { configFile: o.config } : {}),
          env: io.env,
          cwd: io.cwd,
          signal: stop.signal,
          onTry: (t) => io.stderr.write(tryLine(t)),
        });
      } finally {
        stop.dispose();
      }
      // The plan is the answer, unless the run's report is (--run --json).
      const shown = o.run && o.json ? io.stderr : io.stdout;
      if (o.json && !o.run) io.stdout.write(`${JSON.stringify(answer, null, 2)}\n`);
      else shown.write(planText(answer, o.run ?? false));
      if (o.run)
        setCode(
          await runFile(answer.file, {
            ...(o.config ? { config: o.config } : {}),
            ...(o.json ? { json: true } : {}),
          }),
        );
    });
}

/** One try's end, as it happens (stderr). */
function tryLine(t: PlanTry): string {
  if (t.problems.length === 0) return `termorch: plan: try ${t.try}: valid\n`;
  return `termorch: plan: try ${t.try}: ${t.problems.length} ${t.problems.length === 1 ? "problem" : "problems"}, given back to the planner:\n${t.problems.map((p) => `  - ${p}\n`).join("")}`;
}

/** The plan as a person reads it: waves, critical path, each task's agent and paths, collisions, cost. */
export function planText(a: PlanAnswer, running: boolean): string {
  const n = a.tasks.length;
  const u = a.planner.usage;
  const tokens = u ? `${u.input_tokens} tokens in, ${u.output_tokens} out` : "no usage reported";
  const cost = u?.cost_usd != null ? `, ${u.cost_usd.toFixed(4)} USD` : "";
  const b = a.planner.budget;
  const limit = b
    ? ` (budget ${[b.max_cost_usd === undefined ? null : usd(b.max_cost_usd), b.max_tokens === undefined ? null : `${count(b.max_tokens)} tokens`].filter(Boolean).join(", ")})`
    : "";
  const tries = a.planner.tries.length;
  const width = Math.max(...a.tasks.map((t) => t.id.length));
  return [
    `termorch: plan written to ${a.file}: ${n} ${n === 1 ? "task" : "tasks"} in ${a.waves.length} ${a.waves.length === 1 ? "wave" : "waves"} (run id ${a.run_id})`,
    ...a.waves.map((w, i) => `  wave ${i + 1}: ${w.join(", ")}`),
    `  critical path: ${a.critical_path.join(" -> ")}`,
    ...a.tasks.map(
      (t) =>
        `  ${t.id.padEnd(width)}  ${t.agent}  owns ${t.allowed_paths.length ? t.allowed_paths.join(", ") : "any path"}${t.dependencies.length ? `  after ${t.dependencies.join(", ")}` : ""}`,
    ),
    `  tests_cmd: ${a.tests_cmd ?? "none"}`,
    ...a.collisions.map((c) => `  warning: ${collisionText(c)}`),
    `  planner: ${a.planner.agent}, ${tries} ${tries === 1 ? "try" : "tries"}, ${(a.planner.duration_ms / 1000).toFixed(1)} s, ${tokens}${cost}${limit}; its prompt ${(a.planner.prompt_bytes / 1024).toFixed(1)} KiB (logs: ${a.planner.logs})`,
    `  context files${a.milestones || a.decisions ? ", milestones and decisions" : ""}: ${a.plan_dir}/`,
    running ? "  running it now" : `  edit it if you like, then: termorch run ${a.file}`,
    "",
  ].join("\n");
}
