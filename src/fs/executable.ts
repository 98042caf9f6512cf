import { accessSync, constants, statSync } from "node:fs";
import { delimiter, isAbsolute, join } from "node:path";
import { EnvironmentError } from "../errors.js";

/** The executable file `name` in one of PATH's absolute folders, first match, or null. */
export function executableOnPath(name: string, path: string | undefined): string | null {
  for (const dir of (path ?? "").split(delimiter)) {
    if (!dir || !isAbsolute(dir)) continue;
    const candidate = join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      if (statSync(candidate).isFile()) return candidate;
    } catch {}
  }
  return null;
}

let perlPath: string | null = null;
/**
 * An absolute perl path (the pane supervisor's and the shell gate's watchdog's interpreter), so
 * neither tmux's nor pipe-pane's environment decides which perl runs.
 */
export function findPerl(): string {
  // `/usr/bin:/bin` is execvp's own default when PATH is unset; a miss is looked for again next time.
  perlPath ??= executableOnPath("perl", process.env.PATH ?? "/usr/bin:/bin");
  if (perlPath === null)
    throw new EnvironmentError("perl was not found in PATH; termorch's pane supervisor needs perl 5");
  return perlPath;
}
