import { z } from "zod";
import { Budget, Escalation, NoNul, OnCollision, OnRateLimit, TimeoutS } from "./assignments.js";
import { MergePolicy } from "./merge-policy.js";
import { NotifyConfig } from "./notify.js";
import { RetryFrom } from "./retry-from.js";
import { ReviewSetting } from "./review.js";
import { Sandbox } from "./sandbox.js";

/**
 * tmux socket names (tmux -L) become a file name in tmux's socket folder: no "." or "..", nothing
 * that starts like an option or a hidden file, and short enough for a socket path.
 */
export const SOCKET_NAME_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$/;
export const SOCKET_NAME_RULE =
  "must be 1-64 letters, digits, _ . - starting with a letter, digit or _ (so not . or ..)";

/** The coding-agent CLIs termorch knows by name (src/agent/presets.ts, docs/agents.md). */
export const PresetName = z.enum([
  "claude",
  "codex",
  "aider",
  "gemini",
  "opencode",
  "qwen",
  "kilo",
  "pi",
  "copilot",
  "cn",
]);
export type PresetName = z.infer<typeof PresetName>;

export const AgentSpec = z.strictObject({
  /**
   * argv; placeholders {task_id} {context_path} {workspace} {artifacts_dir} {run_id} {prompt_file} {usage_file}.
   * Without it, the agent is a preset: the one named `preset`, or the one of the agent's own name.
   */
  command: z.array(NoNul).min(1).optional(),
  preset: PresetName.optional().describe(
    "The built-in preset this agent is based on (default: the preset of the agent's own name, when there is one)",
  ),
  model: NoNul.min(1).optional().describe("A preset's model, passed with the CLI's own model flag"),
  args: z
    .array(NoNul)
    .default([])
    .describe("Extra flags appended to a preset's command line (before the prompt, where the CLI takes one)"),
  dangerously_bypass_permissions: z
    .boolean()
    .default(false)
    .describe(
      "Replaces the preset's edit-in-workspace permission flags with its CLI's own flag that skips every permission check (e.g. --dangerously-skip-permissions). Off by default; refused for a CLI that has no such flag",
    ),
  expect_changes: z
    .boolean()
    .optional()
    .describe(
      "The default of the tasks that use this agent (a task's own expect_changes wins); true when neither says",
    ),
  /** Give the agent the pane's terminal (interactive CLIs). */
  tty: z.boolean().default(false),
  timeout_s: TimeoutS.optional(),
  retry_from: RetryFrom.optional(),
  env: z
    .record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, "must be an environment variable name"), NoNul)
    .default({}),
  sandbox: Sandbox.optional(),
  /** The escalation of every task of this agent that has no list of its own. */
  escalation: Escalation.optional(),
  budget: Budget.optional().describe("The budget of each task of this agent that has none of its own"),
  rate_limit: OnRateLimit.optional(),
  max_parallel: z
    .number()
    .int()
    .positive()
    .optional()
    .describe(
      "The most tasks of this agent that run at once (their first attempts' agent), whatever the run's max_parallel; on workers, the coordinator's bound across every host",
    ),
  provider: z
    .string()
    .min(1)
    .optional()
    .describe(
      "The provider group it belongs to: the config's `providers` may bound the group's tasks together",
    ),
});
export type AgentSpec = z.infer<typeof AgentSpec>;

const PerMillion = z.number().min(0).max(1_000_000);

/** What an agent's tokens cost, in USD per million. */
export const Price = z
  .strictObject({
    input: PerMillion.describe("USD per million input tokens read neither from nor into the cache"),
    output: PerMillion.describe("USD per million output tokens"),
    cache_read: PerMillion.optional().describe(
      "USD per million input tokens read from the cache (default: input)",
    ),
    cache_write: PerMillion.optional().describe(
      "USD per million input tokens written to the cache (default: input)",
    ),
  })
  .describe("What an agent's tokens cost, in USD per million tokens");
export type Price = z.infer<typeof Price>;

// git rejects or strips `<`, `>` and newlines in names and addresses.
const GitName = z
  .string()
  .trim()
  .min(1)
  .regex(/^[^<>\n\0]+$/, "must not contain <, > or a line break");

export const Config = z.strictObject({
  $schema: z.string().optional(),
  agents: z.record(z.string().min(1), AgentSpec).default({}),
  providers: z
    .record(
      z.string().min(1),
      z.strictObject({
        max_parallel: z
          .number()
          .int()
          .positive()
          .describe("The most tasks of the group's agents (the agent entries that name it) that run at once"),
      }),
    )
    .default({})
    .describe(
      "Provider groups (an agent entry's `provider`): bounds shared by several agents of one provider or account",
    ),
  prices: z
    .record(NoNul.min(1), Price)
    .default({})
    .describe(
      "What tokens cost, by agent name (an entry of `agents`, or a preset's name) or by model (an agent entry's `model`); the agent's name is looked up first. An attempt whose CLI reports tokens but no cost (gemini, qwen, copilot, cn, codex) gets its cost from here; the report's `usage.cost_source` says which way each cost was known",
    ),
  /** Extra redaction patterns (JavaScript/Perl regex syntax; a leading `(?i)` makes one case-insensitive). */
  redact: z.array(NoNul).default([]),
  /** Environment variable names whose values are always secret, whatever they are called. */
  secret_env: z.array(z.string()).default([]),
  /** Name fragments that make an environment variable secret. */
  secret_name_fragments: z
    .array(z.string())
    .default(["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH", "PRIVATE"]),
  defaults: z
    .strictObject({
      max_parallel: z.number().int().positive().optional(),
      timeout_s: TimeoutS.optional(),
      retry_from: RetryFrom.optional(),
      rate_limit: OnRateLimit.optional(),
      review: ReviewSetting.optional(),
      collisions: OnCollision.optional(),
      planner: NoNul.min(1)
        .optional()
        .describe(
          "`termorch plan`'s planner agent when no --agent is given (a preset's or an agent entry's name)",
        ),
      max_log_bytes: z
        .number()
        .int()
        .positive()
        .default(100 * 1024 * 1024),
      kill_grace_s: TimeoutS.default(5),
      waiting_after_s: TimeoutS.default(30).describe(
        "Interactive tasks: seconds of an unchanged screen after which the agent counts as waiting for input",
      ),
      worktree_include: z.array(z.string()).default([]),
      history_limit: z.number().int().positive().default(10000),
      session_size: z
        .string()
        .regex(/^\d+x\d+$/)
        .default("200x50"),
      sandbox: Sandbox.optional(),
    })
    .default({
      max_log_bytes: 100 * 1024 * 1024,
      kill_grace_s: 5,
      waiting_after_s: 30,
      worktree_include: [],
      history_limit: 10000,
      session_size: "200x50",
    }),
  git: z
    .strictObject({
      author: z
        .strictObject({
          name: GitName.optional().describe(
            "Author and committer name (default: the repository's user.name)",
          ),
          email: GitName.optional().describe(
            "Author and committer e-mail (default: the repository's user.email)",
          ),
        })
        .optional()
        .describe(
          "Who termorch's commits (task results, dependency merges, the integration) are by. Default: the repository's configured user.name/user.email (local, global or system config), else termorch <termorch@localhost>. Each commit also names its run and task in Termorch-Run/Termorch-Task trailers, and a task's commit its attempt (Termorch-Attempt; Termorch-Redo for a redo).",
        ),
      remote: NoNul.min(1)
        .optional()
        .describe(
          "Scale-out (backend bullmq): the git remote the coordinator publishes each task's base to and workers push task branches to: an absolute path of a bare repository, or a URL every host can reach (docs/SCALING.md)",
        ),
      pool: z
        .strictObject({
          max_worktrees: z
            .number()
            .int()
            .nonnegative()
            .default(16)
            .describe("Finished worktrees kept per repository (0 turns the pool off)"),
          max_disk_mb: z
            .number()
            .int()
            .nonnegative()
            .default(20480)
            .describe("Disk the pooled worktrees of all repositories may use together, in MiB"),
        })
        .default({ max_worktrees: 16, max_disk_mb: 20480 })
        .describe(
          "The warm worktree pool: worktrees of merged tasks are kept in termorch's per-user folder and checked out again for the next tasks on the same repository, instead of being deleted and added anew (seconds each on a large repository). termorch clean empties it.",
        ),
    })
    .default({ pool: { max_worktrees: 16, max_disk_mb: 20480 } })
    .describe("How termorch makes commits"),
  tmux: z
    .strictObject({
      /** Socket name (tmux -L); default `termorch`, or $TERMORCH_TMUX_SOCKET. */
      socket: z.string().regex(SOCKET_NAME_PATTERN, SOCKET_NAME_RULE).optional(),
      /**
       * Removed: the opt-in control-mode client could crash tmux <= 3.5 (tmux PR #4980). Still
       * accepted so that a config that set it keeps working; a run says once that it is ignored.
       */
      control_mode: z
        .boolean()
        .optional()
        .describe("Removed: accepted and ignored (a run warns once); every tmux command is a spawned client"),
    })
    .default({}),
  notify: NotifyConfig.optional(),
  merge: MergePolicy.optional(),
  backend: z
    .enum(["local", "bullmq"])
    .optional()
    .describe(
      "Where tasks run: local (this host's tmux, the default) or bullmq (each ready task is a job on Redis that `termorch worker` processes on any host; needs `redis` and `git.remote`)",
    ),
  redis: NoNul.min(1)
    .optional()
    .describe("Scale-out: the Redis URL of the bullmq backend, e.g. redis://127.0.0.1:6379 (--redis wins)"),
});
export type Config = z.infer<typeof Config>;
