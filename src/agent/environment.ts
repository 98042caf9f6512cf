import type { Config } from "../contract/config.js";
import { isSecretName } from "../redact/redactor.js";

/** The only variables taken from termorch's own environment without being named. */
export const BASE_ENV = ["PATH", "HOME", "LANG", "TERM", "USER", "SHELL"] as const;

export interface AgentEnvironment {
  /** The agent's whole environment. */
  env: Record<string, string>;
  /** Values that must never reach a file. */
  secrets: string[];
}

/**
 * Builds an agent's environment: the minimal base, then the assignment's `env_vars`
 * (`NAME` passes our value through, `NAME=VALUE` sets it), the agent's and the task's `env`,
 * and finally the `TERMORCH_*` variables, which nothing may override.
 */
export function agentEnvironment(opts: {
  processEnv: Readonly<Record<string, string | undefined>>;
  envVars: readonly string[];
  agentEnv: Readonly<Record<string, string>>;
  taskEnv: Readonly<Record<string, string>>;
  termorch: Readonly<Record<string, string>>;
  config: Config;
}): AgentEnvironment {
  const env: Record<string, string> = {};
  for (const name of BASE_ENV) {
    const value = opts.processEnv[name];
    if (value !== undefined) env[name] = value;
  }
  env.TERM ??= "xterm-256color";
  for (const entry of opts.envVars) {
    const eq = entry.indexOf("=");
    if (eq < 0) {
      const value = opts.processEnv[entry];
      if (value !== undefined) env[entry] = value;
    } else env[entry.slice(0, eq)] = entry.slice(eq + 1);
  }
  Object.assign(env, opts.agentEnv, opts.taskEnv, opts.termorch);
  const secrets = Object.entries(env)
    .filter(([name]) => !(BASE_ENV as readonly string[]).includes(name) && !name.startsWith("TERMORCH_"))
    .filter(([name]) => isSecretName(name, opts.config.secret_name_fragments, opts.config.secret_env))
    .map(([, value]) => value);
  return { env, secrets };
}

/** Secret values among everything a run passes to agents, for the run-wide redactor. */
export function secretValuesOf(
  processEnv: Readonly<Record<string, string | undefined>>,
  names: readonly string[],
  config: Config,
): string[] {
  const out: string[] = [];
  for (const entry of names) {
    const eq = entry.indexOf("=");
    const name = eq < 0 ? entry : entry.slice(0, eq);
    const value = eq < 0 ? processEnv[entry] : entry.slice(eq + 1);
    if (value !== undefined && isSecretName(name, config.secret_name_fragments, config.secret_env))
      out.push(value);
  }
  return out;
}
