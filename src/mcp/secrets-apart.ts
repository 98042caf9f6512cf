import type { InputProblem } from "../errors.js";

/** An inline document ready to be written down, and the secret values kept out of it. */
export interface Apart {
  doc: Record<string, unknown>;
  /** `NAME=VALUE` entries of `environment.env_vars` whose name is a secret's: given to the run's driver instead. */
  env: Record<string, string>;
  problems: InputProblem[];
}

/**
 * termorch writes an inline document to disk (for its run, and a resume), and never writes a
 * secret. So a secret-named `NAME=VALUE` of `environment.env_vars` becomes a plain `NAME`, whose
 * value the driver gets in its environment, which `NAME` passes through. A task's `env` has no
 * such form: a secret-named entry there is refused. Anything malformed is left for validation.
 */
export function secretsApart(doc: Record<string, unknown>, isSecret: (name: string) => boolean): Apart {
  const env: Record<string, string> = {};
  const problems: InputProblem[] = [];
  let out = doc;
  const environment = record(doc.environment);
  if (environment && Array.isArray(environment.env_vars)) {
    const vars = environment.env_vars.map((entry) => {
      if (typeof entry !== "string") return entry;
      const eq = entry.indexOf("=");
      if (eq < 0 || !isSecret(entry.slice(0, eq))) return entry;
      env[entry.slice(0, eq)] = entry.slice(eq + 1);
      return entry.slice(0, eq);
    });
    out = { ...doc, environment: { ...environment, env_vars: vars } };
  }
  if (Array.isArray(doc.tasks))
    for (const [i, task] of doc.tasks.entries()) {
      const taskEnv = record(record(task)?.env);
      for (const name of Object.keys(taskEnv ?? {}).filter(isSecret))
        problems.push({
          field: `tasks[${i}].env.${name}`,
          message: `${name} is a secret's name, and termorch would have to write its value to disk to run this document`,
        });
    }
  return { doc: out, env, problems };
}

function record(value: unknown): Record<string, unknown> | null {
  return value !== null && typeof value === "object" && !Array.isArray(value)
    ? (value as Record<string, unknown>)
    : null;
}
