import { secretValuesOf } from "../agent/environment.js";
import type { RunInput } from "../input/assignments-file.js";
import { Redactor, secretSources } from "../redact/redactor.js";

/**
 * The run's redactor (its secret values, the config's patterns, token formats) and the secrets
 * gate's finder (its secret values alone; null without any).
 */
export function runRedaction(
  input: RunInput,
  env: Readonly<Record<string, string | undefined>>,
): { redactor: Redactor; secretFinder: Redactor | null } {
  const secrets = secretValuesOf(
    env,
    [
      ...input.assignments.environment.env_vars,
      ...input.assignments.tasks.flatMap((t) => Object.entries(t.env).map(([k, v]) => `${k}=${v}`)),
      ...input.tasks.flatMap((r) =>
        r.agents.flatMap(({ agent }) => Object.entries(agent.env).map(([k, v]) => `${k}=${v}`)),
      ),
    ],
    input.config,
  );
  return {
    redactor: Redactor.from(input.config.redact, secrets),
    secretFinder: secrets.length > 0 ? new Redactor(secretSources(secrets)) : null,
  };
}
