import { secretValuesOf } from "../agent/environment.js";
import { Config } from "../contract/config.js";
import { isSecretName, Redactor } from "../redact/redactor.js";
import type { Io } from "./io.js";

/** The values of termorch's secret-named environment variables and the token formats (the default config's rules). */
export function environmentRedactor(env: Io["env"]): Redactor {
  const config = Config.parse({});
  const names = Object.keys(env).filter((name) =>
    isSecretName(name, config.secret_name_fragments, config.secret_env),
  );
  return Redactor.from(config.redact, secretValuesOf(env, names, config));
}
