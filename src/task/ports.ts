import type { Logger } from "pino";
import type { LogNames } from "../fs/log-names.js";
import type { WorktreePool } from "../git/worktree-pool.js";
import type { Ledger } from "../ledger/ledger.js";
import type { Notifier } from "../notify/notifier.js";
import type { Redactor } from "../redact/redactor.js";
import type { TaskRunner } from "../runner/task-runner.js";
import type { TaskWorkspace } from "./workspace.js";

/**
 * What a run works through: the adapters at its edges. The driver opens them (src/run/), tests
 * inject fakes for the runner, the workspace and the notifier's delivery.
 */
export interface Ports {
  /** Where attempts run (the task-runner seam). */
  readonly runner: TaskRunner;
  /** The git operations on the user's repository (the workspace seam). */
  readonly workspace: TaskWorkspace;
  /** The warm pool of the repository's finished worktrees; null without a repository. */
  readonly pool: WorktreePool | null;
  readonly now: () => number;
  readonly log: Logger;
  readonly redactor: Redactor;
  /** Matches the run's secret values alone (no token formats): the secrets gate's; null without secrets. */
  readonly secretFinder: Redactor | null;
  /** events.jsonl: every decision, hash-chained. */
  readonly ledger: Ledger;
  /** Names of the run's log files (logs/), unique across its tasks and gates. */
  readonly logNames: LogNames;
  /** Tells the config's `notify` command about failed tasks and the run's end (docs/guides/daemon-and-cron.md: Notifications). */
  readonly notifier: Notifier;
}
