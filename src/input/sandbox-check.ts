import { taskSandbox } from "../agent/command.js";
import { InputError } from "../errors.js";
import { sandboxTools } from "../sandbox/probe.js";
import type { RunInput } from "./assignments-file.js";

/**
 * A run whose tasks are sandboxed needs a machine that can make the sandbox: refused up front
 * (exit 2) with what to install or enable, rather than failing every task at launch.
 */
export function checkSandboxes(
  input: RunInput,
  processEnv: Readonly<Record<string, string | undefined>>,
): void {
  const sandboxed = input.tasks.filter((r) =>
    r.agents.some(({ agent }) => taskSandbox(input.config, agent, r.task) !== null),
  );
  if (sandboxed.length === 0) return;
  const tools = sandboxTools(processEnv.PATH);
  if (typeof tools !== "string") return;
  const ids = sandboxed.map((r) => r.task.id);
  const named = ids.length > 3 ? `${ids.slice(0, 3).join(", ")} and ${ids.length - 3} more` : ids.join(", ");
  throw new InputError(
    [
      {
        file: input.file,
        field: "sandbox",
        message: `${ids.length > 1 ? `tasks ${named} run` : `task ${named} runs`} sandboxed, but ${tools}`,
      },
    ],
    "Make the sandbox possible (or turn it off) and run again; nothing was started.",
    input.runId,
  );
}
