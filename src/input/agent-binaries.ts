import { statSync } from "node:fs";
import { allAgents } from "../agent/command.js";
import { agentEnvironment } from "../agent/environment.js";
import type { Task } from "../contract/assignments.js";
import type { Config } from "../contract/config.js";
import type { AgentRow } from "../contract/mcp.js";
import { InputError, type InputProblem } from "../errors.js";
import { executableOnPath } from "../fs/executable.js";
import { agentField, agentLabel, type RunAgent, type RunInput } from "./assignments-file.js";

/** Claude Code's permission bypass, which it refuses as root (2.1: "cannot be used with root/sudo privileges"). */
const CLAUDE_BYPASS = "--dangerously-skip-permissions";

/**
 * Every task whose agent (or an agent of its escalation) is a preset needs the preset's CLI on
 * the PATH the agent will get (the environment's, or one the assignment or config sets), and a
 * prompt: refused up front with what to install, rather than failing each task at launch with
 * exit 127.
 */
export function checkAgentBinaries(
  input: RunInput,
  processEnv: Readonly<Record<string, string | undefined>>,
  uid: number | undefined = process.getuid?.(),
): void {
  const problems: InputProblem[] = [];
  for (const r of input.tasks) {
    const i = input.assignments.tasks.indexOf(r.task);
    const preset = r.agents.find((a) => a.agent.requires);
    // A preset's whole prompt is this file (plus what dependencies did): empty, the CLI gets nothing to do.
    if (
      preset &&
      r.task.dependencies.length === 0 &&
      statSync(r.contextPath, { throwIfNoEntry: false })?.size === 0
    )
      problems.push({
        file: input.file,
        field: `tasks[${i}].context_path`,
        task: r.task.id,
        message: `the context file ${r.contextPath} is empty: it is the whole prompt of ${agentLabel(preset, r.task.agent)}`,
      });
    for (const a of r.agents)
      problems.push(
        ...agentProblems(input, processEnv, uid, a, {
          at: { file: input.file, field: agentField(i, a), task: r.task.id },
          named: agentLabel(a, r.task.agent),
          task: r.task,
        }),
      );
  }
  const reviewer = input.mergeReviewer;
  if (reviewer)
    problems.push(
      ...agentProblems(input, processEnv, uid, reviewer, {
        at: { file: input.file, field: "mode.merge.review" },
        named: `agent "${reviewer.name}" (the reviewer of the run's integration)`,
        task: null,
      }),
    );
  if (problems.length)
    throw new InputError(
      problems,
      "Install the agents' CLIs (or fix PATH), give them a prompt, and run again; nothing was started.",
      input.runId,
    );
}

/** `termorch plan`'s planner agent can run here: its CLI is on its PATH (else exit 2, nothing started). */
export function checkPlannerAgent(
  input: RunInput,
  processEnv: Readonly<Record<string, string | undefined>>,
  planner: RunAgent,
  uid: number | undefined = process.getuid?.(),
): void {
  const problems = agentProblems(input, processEnv, uid, planner, {
    at: { field: "--agent" },
    named: `the planner agent "${planner.name}"`,
    task: null,
  });
  if (problems.length)
    throw new InputError(
      problems,
      "Install the planner's CLI (or fix PATH), or pass another --agent; nothing was started.",
    );
}

/** Why one of the run's agents cannot run here: its CLI is not on its PATH, or it is Claude's bypass as root. */
function agentProblems(
  input: RunInput,
  processEnv: Readonly<Record<string, string | undefined>>,
  uid: number | undefined,
  { agent }: RunAgent,
  where: { at: Omit<InputProblem, "message">; named: string; task: Pick<Task, "env" | "interactive"> | null },
): InputProblem[] {
  const needs = agent.requires;
  if (!needs) return [];
  const { at, named } = where;
  const { env } = agentEnvironment({
    processEnv,
    envVars: input.assignments.environment.env_vars,
    agentEnv: agent.env,
    taskEnv: where.task?.env ?? {},
    termorch: {},
    config: input.config,
  });
  const problems: InputProblem[] = [];
  // Claude Code refuses its bypass as root (exit 1, every task), unless told it runs in a sandbox.
  if (
    uid === 0 &&
    agent.preset === "claude" &&
    !where.task?.interactive &&
    bypasses(agent.command) &&
    env.IS_SANDBOX !== "1"
  )
    problems.push({
      ...at,
      message: `${named} runs claude with ${CLAUDE_BYPASS}, which Claude Code refuses to run as root; run termorch as another user, drop dangerously_bypass_permissions, or, inside a sandbox or container, give the agent IS_SANDBOX=1 (its env)`,
    });
  if (!binaryOnPath(needs.binary, env.PATH))
    problems.push({
      ...at,
      message: `${named} runs ${needs.binary}, which is not on the agent's PATH (${env.PATH ?? "unset"}); install it (${needs.install}) or give the agent a PATH that has it (environment.env_vars, the task's or the agent's env)`,
    });
  return problems;
}

/** Whether a claude command line skips its permission checks (the flag, or the mode it stands for). */
function bypasses(argv: readonly string[]): boolean {
  return argv.some(
    (a, i) => a === CLAUDE_BYPASS || (a === "--permission-mode" && argv[i + 1] === "bypassPermissions"),
  );
}

/** Every agent a task can name, with whether its CLI is on `path` (`termorch agents`). */
export function agentRows(config: Config, path: string | undefined): AgentRow[] {
  return [...allAgents(config)].map(([name, a]) => ({
    name,
    source: a.source,
    preset: a.preset,
    argv: a.command,
    interactive_argv: a.interactive.command,
    prompt: a.prompt,
    output: a.output,
    tty: a.tty,
    binary: a.requires?.binary ?? null,
    on_path: a.requires ? binaryOnPath(a.requires.binary, path) : null,
    install: a.requires?.install ?? null,
  }));
}

/** Whether an executable file of that name is in one of PATH's absolute folders. */
export function binaryOnPath(binary: string, path: string | undefined): boolean {
  return executableOnPath(binary, path) !== null;
}
