import type { Task } from "../contract/assignments.js";
import type { AgentSpec, Config } from "../contract/config.js";

/** Values substituted into an agent's argv, element by element, never through a shell. */
export interface Placeholders {
  task_id: string;
  context_path: string;
  workspace: string;
  artifacts_dir: string;
  run_id: string;
}

const PLACEHOLDER = /\{(task_id|context_path|workspace|artifacts_dir|run_id)\}/g;

export function substitute(argv: readonly string[], values: Placeholders): string[] {
  return argv.map((arg) => arg.replace(PLACEHOLDER, (_, name: keyof Placeholders) => values[name]));
}

/** The agent definition a task uses: its explicit `command`, else the registry entry. */
export function agentFor(task: Pick<Task, "agent" | "command">, config: Config): AgentSpec | undefined {
  // Own keys only: an agent named "constructor" must not find Object.prototype's.
  const registered = Object.hasOwn(config.agents, task.agent) ? config.agents[task.agent] : undefined;
  if (task.command) return { tty: false, env: {}, ...registered, command: task.command };
  return registered;
}
