import { z } from "zod";

/** Where a task's retry starts (task, agent entry, or the config's defaults; the first that says wins). */
export const RetryFrom = z
  .enum(["base", "last_work"])
  .describe(
    'Where a retry starts. "last_work" (the default): from the failed attempt\'s work as it left it (committed to refs/termorch/<run>/work/<task>/<n> first, so nothing is lost until the run merges or is cleaned), for the agent to fix with the feedback section in its prompt; after a timeout or a lost session, from the last committed state instead. "base": from the task\'s start, the failed work dropped (what every retry did before retry_from existed)',
  );
export type RetryFrom = z.infer<typeof RetryFrom>;

/** What a task retries from when nothing says. */
export const DEFAULT_RETRY_FROM: RetryFrom = "last_work";
