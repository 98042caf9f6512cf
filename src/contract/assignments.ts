import { z } from "zod";
import { ApprovalSetting } from "./approval.js";
import { MergePolicy } from "./merge-policy.js";
import { RetryFrom } from "./retry-from.js";
import { ReviewSetting } from "./review.js";
import { Sandbox } from "./sandbox.js";

/** Task ids become file names, branch names and tmux session names. */
export const TASK_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/**
 * Task ids termorch's own branches and files use beside the tasks' (`termorch/<run>/integration`,
 * `termorch/<run>/moved/<branch>`, a halted merge's `artifacts/redo/`): a task of that name
 * would collide with them.
 */
export const RESERVED_TASK_IDS = ["integration", "moved", "redo"] as const;
/** Run ids take part in branch and session names too. */
export const RUN_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;

const envName = /^[A-Za-z_][A-Za-z0-9_]*$/;
/** setTimeout's limit (2^31-1 ms): a longer timeout would fire at once. */
export const MAX_TIMEOUT_S = 2_147_483;
export const TimeoutS = z
  .number()
  .positive()
  .max(MAX_TIMEOUT_S, `at most ${MAX_TIMEOUT_S} s (about 24 days)`);
/** Arguments and environment values travel through C strings: no NUL bytes. */
export const NoNul = z.string().refine((v) => !v.includes("\0"), "must not contain a NUL byte");

/** Agents a task's later attempts run, in order (a task's, or an agent entry's in the config). */
export const Escalation = z
  .array(z.string().min(1))
  .refine((names) => new Set(names).size === names.length, "must not name an agent twice")
  .describe(
    "Agents (config agents or presets) that run the task's later attempts, in order: attempt 1 runs `agent`, attempt 2 the first of this list, attempt 3 the second...; the last one runs every further attempt (`retries` still counts them all). Each is checked as `agent` is (defined, its CLI on PATH, its sandbox possible). A task's own list wins over its agent entry's; an empty list: no escalation",
  );

export const SuccessCriteria = z.strictObject({
  review: ReviewSetting.optional(),
  /** Paths or globs that must exist after the work is done. */
  required_artifacts: z.array(NoNul.min(1)).default([]),
  /** A command line run with `sh -c`; exit 0 means the gate passed. */
  tests_cmd: NoNul.min(1).optional(),
  handoff: z
    .boolean()
    .optional()
    .describe(
      "An ALTO handoff: termorch pre-creates its template (Summary, Files Touched, How to Verify) at $TERMORCH_HANDOFF (artifacts/<id>/handoff.md), the handoff gate checks its sections and that every file it lists is one the task changed, and dependents' prompts include it. At the run level: the default of every task",
    ),
  git_control_files: z
    .enum(["allow", "refuse"])
    .optional()
    .describe(
      'What the task\'s changes may do to git itself: add or change a .gitattributes (filters and merge drivers git runs), a .gitmodules or a nested repository (a gitlink), or files in a hook folder (.githooks/, .husky/). "allow" (the default): merged like any file, and named in the task\'s `git_control_files` in the report; "refuse": the task fails its `git_control_files` gate (reason validation). At the run level: the default of every task',
    ),
});
export type SuccessCriteria = z.infer<typeof SuccessCriteria>;

const MaxCostUsd = z
  .number()
  .positive()
  .describe(
    "USD its agents may spend, as their CLIs report it or the config's `prices` compute it; at it, no new attempt starts (`validate` refuses it over an agent whose cost is neither reported nor priced)",
  );
const MaxTokens = z
  .number()
  .int()
  .positive()
  .describe("Tokens (input and output) its agents may use; at it, no new attempt starts");

/** A spending limit: a task's, an agent entry's (for each of its tasks), or the run's (resource_limits). */
export const Budget = z
  .strictObject({ max_cost_usd: MaxCostUsd.optional(), max_tokens: MaxTokens.optional() })
  .describe(
    "A budget: once its agents have spent it, no new attempt starts, and a task that would need one fails with reason `budget`",
  );
export type Budget = z.infer<typeof Budget>;

export const OnRateLimit = z
  .strictObject({
    on: z
      .enum(["wait", "fallback", "fail"])
      .default("wait")
      .describe(
        "What an attempt its CLI gave up on for a rate limit or a usage cap (reason `rate_limited`) is followed by: `wait` for the limit to lift (the reset time the CLI gave, else a backoff from `backoff_s`), then run it again, not counted against `retries`; `fallback`: the next agent of `fallback` runs the attempt again at once, from the same start (and, until the limit lifts, the run's later tasks of the limited agent start on it), waiting as `wait` does once the list is used up; `fail`: the task fails with reason `rate_limited`",
      ),
    fallback: z
      .array(z.string().min(1))
      .default([])
      .describe(
        "Agents (config agents or presets) that run an attempt in place of one whose agent is rate limited, in order (`on: fallback`); each is checked as `agent` is",
      ),
    max_wait_s: z
      .number()
      .int()
      .positive()
      .default(3600)
      .describe(
        "The most time a task may lose to rate limits: its waits, and its attempts that met one (their CLI's own retrying included), together; past it, it fails with reason `rate_limited`",
      ),
    backoff_s: z
      .number()
      .positive()
      .default(60)
      .describe("The first wait when the CLI gave no reset time; each next one doubles it"),
    max_retrying_s: z
      .number()
      .positive()
      .default(120)
      .describe(
        "How long a CLI that says it retries a rate limit by itself (qwen, gemini, codex, pi, copilot) may go on before termorch ends its attempt as `rate_limited` (qwen's own retrying lasts about 40 minutes)",
      ),
  })
  .describe(
    "What a rate limit or a usage cap does to a task (its own, else its agent entry's, else the config's defaults)",
  );
export type OnRateLimit = z.infer<typeof OnRateLimit>;

export const OnBudget = z
  .enum(["stop", "finish_running"])
  .describe(
    "What a budget reached does to the attempts running then: `stop` ends them (their tasks fail with reason `budget`), `finish_running` lets them end by themselves; either way no new attempt starts",
  );
export type OnBudget = z.infer<typeof OnBudget>;

export const Task = z.strictObject({
  id: z
    .string()
    .regex(TASK_ID_PATTERN, "must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")
    .refine((id) => !(RESERVED_TASK_IDS as readonly string[]).includes(id), {
      error: (issue) =>
        `"${String(issue.input)}" is reserved: termorch's own ${issue.input === "redo" ? "files use artifacts/redo/" : `branches use termorch/<run>/${String(issue.input)}`}; choose another id`,
    }),
  agent: z.string().min(1),
  escalation: Escalation.optional(),
  context_path: z.string().min(1),
  dependencies: z.array(z.string()).default([]),
  /** Explicit argv; overrides the agent registry's command. */
  command: z.array(NoNul).min(1).optional(),
  timeout_s: TimeoutS.optional(),
  retries: z.number().int().min(0).max(20).default(0),
  retry_from: RetryFrom.optional(),
  budget: Budget.optional().describe("This task's budget (its agent entry's otherwise), besides the run's"),
  approval: ApprovalSetting.optional(),
  rate_limit: OnRateLimit.optional(),
  env: z.record(z.string().regex(envName, "must be an environment variable name"), NoNul).default({}),
  allowed_paths: z.array(NoNul.min(1)).optional(),
  success_criteria: SuccessCriteria.optional(),
  setup_cmd: NoNul.min(1)
    .optional()
    .describe(
      "This task's set-up command line; it replaces `environment.setup_cmd` for this task (they are not both run)",
    ),
  interactive: z
    .boolean()
    .optional()
    .describe(
      "Run the agent in the pane's terminal as a person would (a preset's interactive form): termorch pastes the prompt into it once its screen is ready, marks the task waiting_input when it stops for input, `termorch send` answers it, and it ends when the agent exits, on `termorch finish`, or when done_when appears",
    ),
  waiting_after_s: TimeoutS.optional().describe(
    "Interactive tasks: seconds of an unchanged screen after which the agent counts as waiting for input (default: the config's defaults.waiting_after_s)",
  ),
  expect_changes: z
    .boolean()
    .optional()
    .describe(
      "Whether an attempt that exits 0 must leave a change: with true (the default) one that changed nothing in its worktree (no diff against its start, no commit) and produced none of its required_artifacts fails with reason no_changes. false for agents whose work is not a change (a review, a report into $TERMORCH_ARTIFACTS_DIR)",
    ),
  done_when: NoNul.min(1)
    .refine(
      (p) => !p.startsWith("/") && !p.split(/[\\/]/).includes(".."),
      "must be a path relative to the worktree, without ..",
    )
    .optional()
    .describe(
      "Interactive tasks: a path relative to the task's working folder; when it appears, termorch ends the agent (TERM, KILL after kill_grace_s) and the task counts as done",
    ),
  sandbox: Sandbox.optional(),
  start_commit: z
    .string()
    .regex(/^[0-9a-f]{40}([0-9a-f]{24})?$/, "must be a full commit id (40 or 64 lowercase hex digits)")
    .optional()
    .describe(
      "A commit of the workspace's repository the task starts from instead of the run's base (HEAD), merged with its dependencies' results; it must share history with HEAD. Written by termorch into a halted merge's artifacts/redo/<task>.json (the integration of what merged cleanly), so the task is done again on top of it. A full id, not a ref: it cannot move between validation and the run",
    ),
  conflict_file: NoNul.min(1)
    .optional()
    .describe(
      "A Markdown file appended to the task's prompt after the dependency section (a regular file of at most 1 MiB, relative to the assignments file's folder): the conflict section termorch writes beside a halted merge's artifacts/redo/<task>.json",
    ),
});
export type Task = z.infer<typeof Task>;

export const ResourceLimits = z.strictObject({
  max_parallel: z.number().int().positive().optional(),
  max_cost_usd: MaxCostUsd.optional().describe(
    "USD the whole run's agents may spend (every task and attempt); at it, no new attempt starts and the tasks that would need one fail with reason `budget`",
  ),
  max_tokens: MaxTokens.optional().describe(
    "Tokens (input and output) the whole run's agents may use; at it, no new attempt starts",
  ),
  on_budget: OnBudget.optional().describe(
    "What the run's budget or a task's, once reached, does to the attempts running then (default `stop`): spend is counted as each CLI streams its usage (codex, opencode, pi; interactive transcripts), else as attempts end",
  ),
  timeout_s: TimeoutS.optional(),
  memory_mb: z.number().int().positive().optional(),
  max_log_bytes: z.number().int().positive().optional(),
});
export type ResourceLimits = z.infer<typeof ResourceLimits>;

export const Environment = z.strictObject({
  /** Relative to the assignments file's folder. */
  workspace_dir: z.string().min(1),
  /** `NAME` passes termorch's value through; `NAME=VALUE` sets it. */
  env_vars: z
    .array(NoNul.regex(/^[A-Za-z_][A-Za-z0-9_]*(=[\s\S]*)?$/, "must be NAME or NAME=VALUE"))
    .default([]),
  resource_limits: ResourceLimits.default({}),
  /** Untracked workspace paths symlinked into every worktree. */
  worktree_include: z.array(z.string().min(1)).default([]),
  worktree_copy: z
    .array(NoNul.min(1))
    .default([])
    .describe(
      "Untracked workspace paths (files or folders, e.g. `.env`) copied into every task worktree instead of linked, so an agent's edit never reaches the workspace's copy. Each must exist in the workspace and not be tracked. Never committed; kept across a retry's reset. Not used when the workspace is not a git repository (tasks then run in it)",
    ),
  setup_cmd: NoNul.min(1)
    .optional()
    .describe(
      "A command line run with `sh -c` in each fresh task worktree (the workspace itself when it is not a git repository) before the agent starts, with the task's environment: e.g. `npm ci --prefer-offline`. Its output goes to `logs/setup-<task>-<ts>.out/.err`; the report has a `setup` gate. A failure (exit code not 0, timeout, exit status lost) fails the task with reason `setup` and starts no agent. A retry runs it again in the reset worktree. A task's own `setup_cmd` replaces this one",
    ),
  setup_timeout_s: TimeoutS.optional().describe(
    "Seconds a setup_cmd may run; default: the task's timeout (timeout_s by its precedence), none when there is none. The agent's own timeout starts when it launches, after the set-up",
  ),
});
export type Environment = z.infer<typeof Environment>;

/** What a predicted collision is: two tasks that may run at once and whose allowed_paths overlap. */
export const OnCollision = z
  .enum(["warn", "error"])
  .describe(
    'Two tasks that may run at the same time (no dependency path between them) and whose allowed_paths overlap may change the same files: "warn" (the default) names each pair in `validate`, `run --dry-run` and the report; "error" refuses the file (exit 2), for a plan that must be file-disjoint',
  );
export type OnCollision = z.infer<typeof OnCollision>;

export const Mode = z.strictObject({
  dry_run: z.boolean().default(false),
  verify: z.boolean().default(true),
  merge: MergePolicy.optional(),
  collisions: OnCollision.optional(),
});
export type Mode = z.infer<typeof Mode>;

export const Assignments = z.strictObject({
  $schema: z.string().optional(),
  run_id: z.string().regex(RUN_ID_PATTERN, "must match ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$").optional(),
  tasks: z.array(Task).min(1, "at least one task is required"),
  environment: Environment,
  success_criteria: SuccessCriteria.default({ required_artifacts: [] }),
  mode: Mode.default({ dry_run: false, verify: true }),
});
export type Assignments = z.infer<typeof Assignments>;
