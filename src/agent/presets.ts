/**
 * Built-in presets for the coding-agent CLIs users hand termorch tasks for (issue 11). Pure data: what
 * each CLI's documented non-interactive mode is, how the task's prompt reaches it, which parser reads
 * its output, and the flags a config option may add. Every fact names where it came from; the long
 * form, with what each CLI's documentation is silent on, is `docs/agents.md`.
 *
 * The prompt never becomes one argv element: Linux caps a single argument at 128 KiB
 * (MAX_ARG_STRLEN) and a task's context file can be bigger. Each CLI therefore reads it from standard
 * input, or (aider) from a file named by the `{prompt_file}` placeholder.
 */

import { PresetName } from "../contract/config.js";
import type { KeyAnswer } from "../contract/keys.js";
import type { SandboxNeeds } from "../sandbox/policy.js";
import {
  OPENCODE_PLUGIN_FILE,
  OPENCODE_PLUGIN_SOURCE,
  PI_EXTENSION_FILE,
  PI_EXTENSION_SOURCE,
} from "./event-recorders.js";
import type { OutputFormat } from "./results.js";
import type { StateEventFormat } from "./state-events.js";

/** Names `"agent"` may use with no config entry (the config's schema holds the list). */
export const PRESET_NAMES = PresetName.options;
export type { PresetName };

/** How the prompt reaches the CLI: its standard input, or a file named by `{prompt_file}` in its argv. */
export type PromptDelivery = "stdin" | "file";

/** Which parser reads the CLI's stdout for its result and usage (src/agent/results.ts). */
export type OutputParser = OutputFormat;

/**
 * A question the CLI asks its user, recognised on its screen. termorch never answers one: the
 * task waits for input saying what is asked and which keys answer it, and the operator answers
 * with `termorch send --keys`.
 */
export interface KnownDialog {
  /** A regular expression (source, no flags) matching the screen while it shows. */
  screen: string;
  /** What it asks, as status, watch, serve and notify say it. */
  asks: string;
  /**
   * The keys that pick its usual answers, as observed in the pinned CLI: a digit where the menu
   * takes one whatever is highlighted, a key such as Escape that does not depend on the cursor,
   * Enter only for the answer highlighted when the question opens. Empty: none to name.
   */
  answers: readonly KeyAnswer[];
}

/** Its turn stops on a "no": what to do instead is the operator's next message. */
const NO_THEN_SAY = "its turn stops; send what to do instead";

/** The CLI run as a terminal program a person would type into. */
export interface InteractiveForm {
  /** The whole command line, binary first; the prompt is pasted into the pane, never passed here. */
  argv: readonly string[];
  /**
   * Flags and environment that trust the task's worktree (`{workspace}`) for this invocation
   * only, so the CLI does not ask: never the user's own configuration. Empty when it needs none.
   */
  trust: { args: readonly string[]; env: Readonly<Record<string, string>> };
  /**
   * A regular expression (source, no flags) that matches the screen while the CLI's input prompt
   * waits for a message. termorch pastes the task's prompt only over a screen it matches (and
   * `busy` and every dialog do not).
   */
  waiting: string | null;
  /** A regular expression matching the screen while the CLI is busy (so it is not waiting), or null. */
  busy: string | null;
  /**
   * A regular expression matching the screen while a paste sits in the CLI's input box unsent,
   * folded into a placeholder (gemini's `[Pasted Text: 17 lines]`): the Enter after it was taken as
   * a line break. termorch then presses Enter once more, finishing its own paste; absent: never.
   */
  pasteHeld?: string;
  /** The questions the CLI may ask before or while it works. */
  dialogs: readonly KnownDialog[];
  /**
   * How the CLI reports its own state: flags that make it append its events to
   * `$TERMORCH_AGENT_EVENTS` (they may name `{agent_config}`), and how to read them
   * (src/agent/state-events.ts). null: the screen only.
   */
  events: {
    args: readonly string[];
    format: StateEventFormat;
    /**
     * Files (path → content) termorch writes into the task's own configuration folder,
     * `{agent_config}`, before each attempt: a plugin of termorch's (src/agent/event-recorders.ts).
     */
    files?: Readonly<Record<string, string>>;
    /** The environment variable through which the CLI loads that folder besides the user's own. */
    configEnv?: string;
  } | null;
}

/**
 * Where a CLI keeps its sessions for its user, when termorch can find a task's among them by the
 * folder it ran in (src/agent/session-files.ts): read for the result and usage its output lacks.
 */
export type SessionStore = "gemini" | "qwen" | "pi" | "copilot" | "cn";

export interface AgentPreset {
  /** The executable looked up on PATH. */
  binary: string;
  /**
   * The non-interactive command line, binary first, before the permission flags; placeholders
   * {task_id} {context_path} {workspace} {artifacts_dir} {run_id} {prompt_file} are substituted
   * element by element.
   */
  argv: readonly string[];
  /** The CLI's edit-in-the-workspace permission mode: the default, never a bypass. */
  edit_mode: readonly string[];
  /**
   * Flags that replace `edit_mode` when the config turns the bypass on explicitly. They replace
   * rather than add to it, because several CLIs reject both at once (gemini: `--yolo` with
   * `--approval-mode`; codex: the bypass conflicts with `--sandbox`). Empty when the CLI has none.
   */
  bypass: readonly string[];
  /** Arguments that must come last (codex's `-`, the "read the prompt from stdin" positional). */
  tail: readonly string[];
  /**
   * Paths (globs, relative to the worktree) the CLI writes for itself in its working folder and that
   * are not the task's work: never to be committed.
   */
  scratch: readonly string[];
  prompt: PromptDelivery;
  output: OutputParser;
  /** The flag that takes a model name as the next argument. */
  model_flag: string;
  /**
   * The flag that caps the USD one headless invocation may spend, given after the base argv:
   * termorch passes it what is left of the task's and the run's budgets. Absent: the CLI has none.
   */
  budget_flag?: string;
  /** Its sessions, read after an attempt for what its output does not say (interactive: all of it); null: none readable. */
  sessions: SessionStore | null;
  interactive: InteractiveForm;
  /**
   * What its CLI needs in a sandbox (src/sandbox/policy.ts): the folders (ending in `/`) and files
   * it writes for itself (config, sessions, caches), and its API's hosts, the default allowlist.
   */
  sandbox: SandboxNeeds & {
    /**
     * The edit mode inside termorch's sandbox, when the CLI's own one cannot work there: codex's
     * sandbox is a bubblewrap of its own, and a nested one cannot map its user as root. Outside
     * the worktree nothing is writable anyway.
     */
    edit_mode?: readonly string[];
  };
  /** What to install when `binary` is not on PATH. */
  install: string;
  /** Where each fact above comes from: fact → documentation URL or repository path @ commit. */
  docs: Readonly<Record<string, string>>;
}

/**
 * The hook command that records an event: the hook's input (one JSON document on stdin) appended
 * as one line to the file termorch names in the agent's environment. A fixed string: the CLI runs
 * its hooks through a shell, and nothing of the task's goes into it.
 */
const APPEND_STDIN_EVENT = '{ cat; echo; } >> "$TERMORCH_AGENT_EVENTS"';

/** Claude Code's hooks, given per invocation with `--settings` (a JSON string): never its settings files. */
const CLAUDE_HOOKS = JSON.stringify({
  hooks: Object.fromEntries(
    ["UserPromptSubmit", "PermissionRequest", "Notification", "Stop", "StopFailure"].map((event) => [
      event,
      [{ hooks: [{ type: "command", command: APPEND_STDIN_EVENT }] }],
    ]),
  ),
});

/**
 * codex's notify program gets the event as its last argument (agent-turn-complete only). A TOML
 * array for `-c`: sh prints its first argument as one line into the events file.
 */
const CODEX_NOTIFY =
  'notify=["sh","-c","printf \'%s\\n\' \\"$1\\" >> \\"$TERMORCH_AGENT_EVENTS\\"","termorch-notify"]';

/** Qwen Code's permission questions (a Gemini CLI fork): the first answer, and the last. */
const QWEN_ANSWERS: readonly KeyAnswer[] = [
  { keys: ["1"], picks: "1. Yes, allow once" },
  { keys: ["Escape"], picks: `No, suggest changes (${NO_THEN_SAY})` },
];

/** A CLI that does not ask whether to trust its folder. */
const NO_TRUST = { args: [], env: {} } as const;

/** What aider must be told in both of its forms (the reasons are at its preset). */
const AIDER_HOUSEKEEPING = [
  "--no-auto-commits",
  "--no-gitignore",
  "--no-check-update",
  "--no-show-release-notes",
  "--no-analytics",
  "--chat-history-file",
  "{artifacts_dir}/aider.chat.history.md",
  "--input-history-file",
  "{artifacts_dir}/aider.input.history",
] as const;

/** OpenCode's preset; Kilo Code CLI, its fork, is the same CLI under its own name. */
const OPENCODE: AgentPreset = {
  binary: "opencode",
  // `opencode run` is the non-interactive mode; with no message argument it takes piped stdin as
  // the message. `--format json` prints raw JSON events, one per line.
  argv: ["opencode", "run", "--format", "json"],
  // OpenCode's permission defaults already allow edits (and bash); only "ask" rules (by default
  // external_directory, doom_loop) need answering, and `run` rejects those unless --auto is given.
  edit_mode: [],
  bypass: ["--auto"],
  tail: [],
  scratch: [],
  prompt: "stdin",
  output: "opencode-jsonl",
  model_flag: "--model",
  sessions: null,
  interactive: {
    argv: ["opencode"],
    // No trust question at 1.18.
    trust: NO_TRUST,
    // The home screen's placeholder (its example varies); in a session, the input box's mode line
    // (`┃  Build · <model>`), drawn under a running turn too, hence busy.
    waiting: "Ask anything…|(^|\\n) *\u2503 +[A-Z][A-Za-z]* +\u00b7 \\S",
    // The footer while a turn runs (its spinner moves).
    busy: "esc interrupt",
    dialogs: [
      {
        screen: "△ Permission required",
        asks: "opencode asks permission to use a tool",
        // Its answers in a row, ⇆ to move: no digits.
        answers: [
          { keys: ["Enter"], picks: "Allow once (the answer highlighted when it asked)" },
          { keys: ["Escape"], picks: "Reject" },
        ],
      },
    ],
    // Its plugin events, through a plugin folder of the task's (src/agent/event-recorders.ts).
    events: {
      args: [],
      format: "opencode-plugin",
      files: { [OPENCODE_PLUGIN_FILE]: OPENCODE_PLUGIN_SOURCE },
      configEnv: "OPENCODE_CONFIG_DIR",
    },
  },
  sandbox: {
    write: [
      "~/.local/share/opencode/",
      "~/.local/state/opencode/",
      "~/.cache/opencode/",
      "~/.config/opencode/",
    ],
    hosts: ["models.opencode.ai", "api.anthropic.com", "api.openai.com"],
  },
  install:
    "npm install -g opencode-ai (or: curl -fsSL https://opencode.ai/install | bash, brew install anomalyco/tap/opencode)",
  docs: {
    run: "https://opencode.ai/v1/docs/cli/#run",
    permissions_and_auto: "https://opencode.ai/v1/docs/permissions/",
    run_source: "github.com/anomalyco/opencode packages/opencode/src/cli/cmd/run.ts",
    dialog_answers:
      "npm opencode-ai@1.18.33, observed in a tmux pane: Enter allows once, Escape rejects (the file is not written)",
    event_parts: "npm @opencode-ai/sdk@1.19.3 dist/v2/gen/types.gen.d.ts (TextPart, StepFinishPart)",
    install: "github.com/anomalyco/opencode README.md",
  },
};

export const PRESETS: Readonly<Record<PresetName, AgentPreset>> = {
  claude: {
    binary: "claude",
    // `-p` (print mode) with no prompt argument reads the prompt from stdin ("cat file | claude -p");
    // `--output-format json` prints one result object when the run ends.
    argv: ["claude", "-p", "--output-format", "json"],
    // acceptEdits: file edits and common filesystem commands run unasked; other Bash commands are
    // denied in print mode (they show up in the result's permission_denials), never prompted.
    edit_mode: ["--permission-mode", "acceptEdits"],
    bypass: ["--dangerously-skip-permissions"],
    tail: [],
    scratch: [],
    prompt: "stdin",
    output: "claude-json",
    model_flag: "--model",
    // Print mode only; at the cap it exits 1 with subtype error_max_budget_usd, checked after each
    // model call (docs/research/usage-streams.md).
    budget_flag: "--max-budget-usd",
    sessions: null,
    interactive: {
      argv: ["claude", "--permission-mode", "acceptEdits"],
      // 2.1's trust check gives way to this variable before it reads any project's answer (its
      // one use in the CLI): this process, in termorch's worktree, is trusted; nothing is saved.
      // Its hooks fire only in a trusted folder.
      trust: { args: [], env: { CLAUDE_CODE_SANDBOXED: "1" } },
      // The empty input line: ❯ and a no-break space (typed text follows it; the scrollback's
      // prompts use a plain space). It stays drawn under a running turn, hence busy.
      waiting: "(^|\\n)\u276f\u00a0 *(\\n|$)",
      // The footer hint shown while a turn runs.
      busy: "esc to interrupt",
      dialogs: [
        {
          screen: "Is this a project you created or one you trust",
          asks: "Claude Code asks whether to trust this folder (answering saves it in ~/.claude.json)",
          answers: [
            { keys: ["1"], picks: "1. Yes, I trust this folder (saved in ~/.claude.json)" },
            { keys: ["2"], picks: "2. No, exit (Claude Code exits)" },
          ],
        },
        {
          screen: "Do you want to use this API key\\?",
          asks: "Claude Code asks whether to use the API key in ANTHROPIC_API_KEY (answering saves it in ~/.claude.json)",
          answers: [
            { keys: ["1"], picks: "1. Yes (saved in ~/.claude.json)" },
            {
              keys: ["2"],
              picks: "2. No (saved as rejected in ~/.claude.json; Claude Code is then not logged in)",
            },
          ],
        },
        {
          screen:
            "Choose the text style|Security notes:|Select login method|Unable to connect to Anthropic services",
          asks: "Claude Code's first-run set-up (theme, login): run claude once yourself, then run the task again",
          answers: [],
        },
        {
          screen: "Do you want to proceed\\?",
          asks: "Claude Code asks permission to run a command",
          answers: [
            { keys: ["1"], picks: "1. Yes" },
            { keys: ["3"], picks: `3. No (${NO_THEN_SAY})` },
          ],
        },
        {
          screen: "Do you want to (make this edit|create) ",
          asks: "Claude Code asks permission to edit a file",
          answers: [
            { keys: ["1"], picks: "1. Yes" },
            { keys: ["3"], picks: `3. No (${NO_THEN_SAY})` },
          ],
        },
      ],
      events: { args: ["--settings", CLAUDE_HOOKS], format: "claude-hooks" },
    },
    sandbox: {
      write: ["~/.claude/", "~/.claude.json"],
      hosts: ["api.anthropic.com"],
    },
    install: "npm install -g @anthropic-ai/claude-code (or: curl -fsSL https://claude.ai/install.sh | bash)",
    docs: {
      print_mode_and_stdin: "https://code.claude.com/docs/en/headless",
      flags: "https://code.claude.com/docs/en/cli-reference",
      permission_modes: "https://code.claude.com/docs/en/permission-modes",
      result_shape:
        "npm @anthropic-ai/claude-agent-sdk@0.3.330 sdk.d.ts (SDKResultSuccess, SDKResultError, ModelUsage)",
      busy_hint: "github.com/anthropics/claude-code CHANGELOG.md @ 5cfc0a1905ce0c0a9bd81d8a90fe6b62ff614357",
      dialog_answers:
        "npm @anthropic-ai/claude-code@2.1.197, observed in a tmux pane: each question's digit picks its answer at once (trust, API key, command and edit permission)",
      install: "github.com/anthropics/claude-code README.md @ 5cfc0a1905ce0c0a9bd81d8a90fe6b62ff614357",
    },
  },
  codex: {
    binary: "codex",
    // `codex exec` is the non-interactive mode; `--json` streams JSONL events to stdout.
    argv: ["codex", "exec", "--json"],
    // exec never asks for approvals and defaults to a read-only sandbox; workspace-write lets it
    // edit the worktree. `--full-auto` is deprecated in its favour.
    edit_mode: ["--sandbox", "workspace-write"],
    bypass: ["--dangerously-bypass-approvals-and-sandbox"],
    // PROMPT `-`: "instructions are read from stdin" (the official TypeScript SDK writes the prompt
    // to stdin the same way).
    tail: ["-"],
    scratch: [],
    prompt: "stdin",
    output: "codex-jsonl",
    model_flag: "--model",
    sessions: null,
    interactive: {
      argv: ["codex", "--sandbox", "workspace-write", "--ask-for-approval", "on-request"],
      // An inline table: the dotted form does not keep the dialog away (0.171).
      trust: { args: ["-c", 'projects={"{workspace}"={trust_level="trusted"}}'], env: {} },
      // The empty composer's placeholder (U+203A); it stays drawn under a running turn, hence busy.
      waiting: "(^|\\n)\u203a Ask Codex to do anything",
      busy: "Working \\(.*esc to interrupt\\)",
      dialogs: [
        {
          screen: "Trust this folder\\?",
          asks: "codex asks whether to trust this folder",
          // At 0.171 its 2 picks at once, its 1 alone does not go on.
          answers: [
            { keys: ["1", "Enter"], picks: "1. Trust and continue (saved in ~/.codex/config.toml)" },
            { keys: ["2"], picks: "2. Back to Agent Command Center (codex does not open this folder)" },
          ],
        },
        {
          screen: "Hooks need review",
          asks: "codex asks to review the hooks of this folder",
          // At 0.171 its 3 picks at once, its 2 alone only moves the highlight there.
          answers: [
            { keys: ["3"], picks: "3. Continue without trusting (hooks won't run; nothing is saved)" },
            {
              keys: ["2", "Enter"],
              picks: "2. Trust all and continue (their trust is saved in ~/.codex/config.toml)",
            },
          ],
        },
        {
          screen: "\\d\\. Try new model",
          asks: "codex offers a new model (taking it rewrites ~/.codex/config.toml)",
          // It ignores a paste, and Enter or Escape confirm the highlighted "Try new model".
          answers: [
            {
              keys: ["2"],
              picks: "2. Use existing model (codex notes in ~/.codex/config.toml that you saw the offer)",
            },
            { keys: ["1"], picks: "1. Try new model (codex makes it your model in ~/.codex/config.toml)" },
          ],
        },
        {
          screen: "Would you like to run the following command\\?",
          asks: "codex asks permission to run a command",
          answers: [
            { keys: ["1"], picks: "1. Yes, proceed" },
            { keys: ["3"], picks: `3. No, and tell Codex what to do differently (${NO_THEN_SAY})` },
          ],
        },
        {
          screen: "Would you like to make the following edits\\?",
          asks: "codex asks permission to edit files",
          answers: [
            { keys: ["1"], picks: "1. Yes, proceed" },
            { keys: ["3"], picks: `3. No, and tell Codex what to do differently (${NO_THEN_SAY})` },
          ],
        },
      ],
      events: { args: ["-c", CODEX_NOTIFY], format: "codex-notify" },
    },
    sandbox: {
      write: ["~/.codex/"],
      hosts: ["api.openai.com", "chatgpt.com", "auth.openai.com"],
      edit_mode: ["--sandbox", "danger-full-access"],
    },
    install: "npm install -g @openai/codex (or: brew install --cask codex)",
    docs: {
      non_interactive: "https://developers.openai.com/codex/noninteractive",
      flags: "https://developers.openai.com/codex/cli/reference",
      stdin_dash: "github.com/openai/codex codex-rs/exec/src/cli.rs (Cli::prompt doc comment)",
      events:
        "github.com/openai/codex docs/exec.md; npm @openai/codex-sdk@0.163.0 dist/index.d.ts (ThreadEvent, Usage)",
      exit_code: "github.com/openai/codex codex-rs/exec/src/lib.rs (error_seen → exit 1)",
      install: "github.com/openai/codex README.md",
      dialog_answers:
        "npm @openai/codex@0.171.0, observed in a tmux pane: the model offer's 2 keeps the model at once and its Enter/Escape take the new one; a paste is ignored there (test/agents-real/interactive.test.ts)",
    },
  },
  aider: {
    binary: "aider",
    // `--message-file` sends the file's text as one message, applies the edits and exits.
    // --no-auto-commits: termorch commits the task's work itself; aider's own commits would also
    // cost a model call each. --no-gitignore: otherwise aider offers (and --yes-always accepts) to add
    // `.aider*` to .gitignore, an edit that would be merged into the user's branch.
    // --no-check-update / --no-show-release-notes / --no-analytics: these start-up questions would
    // otherwise be answered "yes" by --yes-always (pip-upgrading aider, opening a browser, opting in to
    // analytics). The two history files go to the task's artifacts instead of the worktree root, where
    // they would be committed. --no-pretty: plain text in the log, which is all there is to parse.
    argv: ["aider", "--message-file", "{prompt_file}", ...AIDER_HOUSEKEEPING, "--no-pretty"],
    // --yes-always answers its confirmations (add files to the chat, create files) but not shell
    // commands, which need an explicit yes it never gives.
    edit_mode: ["--yes-always"],
    bypass: [],
    tail: [],
    // The repo-map cache has no option to move it: aider writes it in the worktree root.
    scratch: [".aider.tags.cache.*"],
    prompt: "file",
    output: "text",
    model_flag: "--model",
    sessions: null,
    interactive: {
      argv: ["aider", ...AIDER_HOUSEKEEPING, "--yes-always"],
      trust: NO_TRUST,
      // Its input prompt: an optional edit-format prefix, optional "multi", then "> " at line end.
      waiting: "(^|\\n)[a-z-]*( multi)?> ?$",
      busy: null,
      dialogs: [],
      events: null,
    },
    sandbox: {
      write: ["~/.aider/", "~/.cache/aider/"],
      hosts: ["api.openai.com", "api.anthropic.com", "openrouter.ai"],
    },
    install: "python -m pip install aider-install && aider-install (or: pipx install aider-chat)",
    docs: {
      scripting: "https://aider.chat/docs/scripting.html",
      options: "https://aider.chat/docs/config/options.html",
      install: "https://aider.chat/docs/install.html",
      start_up_questions:
        "github.com/Aider-AI/aider aider/main.py, aider/versioncheck.py @ 5dc9490bb35f9729ef2c95d00a19ccd30c26339c",
      usage_line:
        "github.com/Aider-AI/aider aider/coders/base_coder.py @ 5dc9490bb35f9729ef2c95d00a19ccd30c26339c",
      input_prompt:
        "github.com/Aider-AI/aider aider/io.py get_input @ 5dc9490bb35f9729ef2c95d00a19ccd30c26339c",
    },
  },
  gemini: {
    binary: "gemini",
    // `-p` forces headless mode and "is appended to stdin input if provided": an empty -p makes the
    // prompt exactly what arrives on stdin. --skip-trust: a fresh worktree is an untrusted folder, and
    // headless gemini exits with FatalUntrustedWorkspaceError there (and would force the approval
    // mode back to default).
    argv: ["gemini", "-p", "", "--output-format", "json", "--skip-trust"],
    edit_mode: ["--approval-mode", "auto_edit"],
    // `--yolo` is deprecated and rejected together with --approval-mode.
    bypass: ["--approval-mode", "yolo"],
    tail: [],
    scratch: [],
    prompt: "stdin",
    output: "gemini-json",
    model_flag: "--model",
    sessions: "gemini",
    interactive: {
      argv: ["gemini", "--approval-mode", "auto_edit"],
      // Trusts the folder for this session only (nothing is saved).
      trust: { args: ["--skip-trust"], env: {} },
      // The empty input box's placeholder.
      waiting: "Type your message or @path/to/file",
      busy: null,
      // For about 40 ms after a paste, gemini takes Enter as a line break (InputPrompt's
      // recentUnsafePasteTime); starved of CPU, it may still be in that window when termorch's
      // Enter comes, well after the paste was drawn: the folded paste stays in the input box.
      pasteHeld: "> \\[Pasted Text: \\d+ lines?\\]",
      dialogs: [],
      events: null,
    },
    sandbox: {
      write: ["~/.gemini/"],
      hosts: ["generativelanguage.googleapis.com", "cloudcode-pa.googleapis.com", "oauth2.googleapis.com"],
    },
    install: "npm install -g @google/gemini-cli (or: brew install gemini-cli)",
    docs: {
      headless: "https://geminicli.com/docs/cli/headless",
      flags: "https://geminicli.com/docs/cli/cli-reference",
      trust: "https://geminicli.com/docs/cli/trusted-folders",
      install: "https://geminicli.com/docs/get-started/installation",
      json_shape:
        "github.com/google-gemini/gemini-cli packages/core/src/output/{types,json-formatter}.ts @ 5411f113cafae26161b4969b0237b8e1e024e2c2",
      stdin:
        "github.com/google-gemini/gemini-cli packages/cli/src/gemini.tsx, utils/readStdin.ts @ 5411f113cafae26161b4969b0237b8e1e024e2c2",
      waiting_placeholder:
        "github.com/google-gemini/gemini-cli packages/cli/src/ui/components/InputPrompt.tsx @ 5411f113cafae26161b4969b0237b8e1e024e2c2",
    },
  },
  opencode: OPENCODE,

  qwen: {
    binary: "qwen",
    // A Gemini CLI fork: with stdin not a terminal it runs headless on what stdin holds (its -p is
    // deprecated). `--output-format json` prints the session's events as one array at the end, the
    // last a Claude-style result (type "result", result, session_id, is_error, usage).
    argv: ["qwen", "--output-format", "json"],
    edit_mode: ["--approval-mode", "auto-edit"],
    bypass: ["--approval-mode", "yolo"],
    tail: [],
    scratch: [],
    prompt: "stdin",
    output: "qwen-json",
    model_flag: "--model",
    sessions: "qwen",
    interactive: {
      argv: ["qwen", "--approval-mode", "auto-edit"],
      // No trust question at 0.24 (checked with a fresh HOME and worktree).
      trust: NO_TRUST,
      // Gemini CLI's empty input box, kept by the fork.
      waiting: "Type your message or @path/to/file",
      busy: "esc to cancel",
      // Their first answer is "Yes, allow once", their last "No, suggest changes (esc)"; how many
      // lie between depends on the folder's trust and the command.
      dialogs: [
        {
          screen: "Apply this change\\?",
          asks: "Qwen Code asks permission to apply a change",
          answers: QWEN_ANSWERS,
        },
        {
          screen: "Allow execution of",
          asks: "Qwen Code asks permission to run a command",
          answers: QWEN_ANSWERS,
        },
      ],
      events: null,
    },
    sandbox: {
      write: ["~/.qwen/"],
      hosts: ["dashscope.aliyuncs.com", "dashscope-intl.aliyuncs.com", "chat.qwen.ai", "portal.qwen.ai"],
    },
    install: "npm install -g @qwen-code/qwen-code",
    docs: {
      headless_and_flags: "npm @qwen-code/qwen-code@0.24.4: qwen --help; checked in test/agents-real",
      output:
        "npm @qwen-code/qwen-code@0.24.4: the JSON array qwen --output-format json prints (test/agents-real)",
      install: "https://github.com/QwenLM/qwen-code README.md",
      dialog_answers:
        "npm @qwen-code/qwen-code@0.24.4 chunks (ToolConfirmationMessage's options); observed in a tmux pane for a command: 1 allows at once, Escape declines",
    },
  },
  // An opencode fork (Kilo Code CLI 7.7): opencode's `run`, its JSON events, permissions and TUI,
  // under its own name (its placeholder ends in three dots).
  kilo: {
    ...OPENCODE,
    binary: "kilo",
    argv: ["kilo", "run", "--format", "json"],
    interactive: {
      ...OPENCODE.interactive,
      argv: ["kilo"],
      waiting: OPENCODE.interactive.waiting!.replace("Ask anything…", "Ask anything(…|\\.\\.\\.)"),
      dialogs: [
        {
          screen: "△ Permission required",
          asks: "Kilo Code asks permission to use a tool",
          // Escape opens "Tell Kilo what to do differently"; Enter there rejects with nothing said.
          answers: [
            { keys: ["Enter"], picks: "Allow once (the answer highlighted when it asked)" },
            { keys: ["Escape", "Enter"], picks: "Reject" },
          ],
        },
      ],
      events: { ...OPENCODE.interactive.events!, configEnv: "KILO_CONFIG_DIR" },
    },
    sandbox: {
      write: ["~/.local/share/kilo/", "~/.local/state/kilo/", "~/.cache/kilo/", "~/.config/kilo/"],
      hosts: ["api.kilo.ai", "kilocode.ai", "models.opencode.ai"],
    },
    install: "npm install -g @kilocode/cli",
    docs: {
      run_and_output:
        "npm @kilocode/cli@7.7.7: kilo run --help and its --format json events, checked in test/agents-real",
      fork_of: "https://github.com/Kilo-Org/kilocode (an opencode fork); docs/agents.md, opencode",
      dialog_answers:
        "npm @kilocode/cli@7.7.7, observed in a tmux pane: Enter allows once; Escape, then Enter, rejects",
    },
  },

  pi: {
    binary: "pi",
    // pi (@mariozechner/pi-coding-agent): `-p` takes piped stdin as the prompt; `--mode json` prints
    // its events as JSONL.
    argv: ["pi", "-p", "--mode", "json"],
    // pi has no permission modes: its agent runs its tools (bash included) unasked. There is
    // nothing to choose and no bypass to give.
    edit_mode: [],
    bypass: [],
    tail: [],
    scratch: [],
    prompt: "stdin",
    output: "pi-jsonl",
    model_flag: "--model",
    sessions: "pi",
    interactive: {
      argv: ["pi"],
      trust: NO_TRUST,
      // Its editor between two rules: empty, nothing between them but a blank line.
      waiting: "(^|\\n)\u2500{10,}\\n([ \\t]*\\n)?\u2500{10,}(\\n|$)",
      busy: null,
      dialogs: [],
      // termorch's extension, loaded for this invocation (src/agent/event-recorders.ts).
      events: {
        args: ["-e", `{agent_config}/${PI_EXTENSION_FILE}`],
        format: "pi-extension",
        files: { [PI_EXTENSION_FILE]: PI_EXTENSION_SOURCE },
      },
    },
    sandbox: {
      write: ["~/.pi/"],
      hosts: ["api.anthropic.com", "api.openai.com", "generativelanguage.googleapis.com"],
    },
    install: "npm install -g @mariozechner/pi-coding-agent",
    docs: {
      print_and_json:
        "npm @mariozechner/pi-coding-agent@0.73.1 README.md (print mode, --mode json); checked in test/agents-real",
      no_permissions: 'npm @mariozechner/pi-coding-agent@0.73.1 README.md ("No permission popups")',
      exit_0_on_model_error: 'observed at 0.73.1 (test/agents-real): stopReason "error", exit 0',
    },
  },

  copilot: {
    binary: "copilot",
    // GitHub Copilot CLI: with stdin not a terminal (and no -p) it runs one prompt-mode session on
    // what stdin holds. `--output-format json` prints its events as JSONL; its tokens are only in
    // the file `--usage-output-file` names. --no-ask-user: its ask_user tool would wait for an
    // answer no one gives. --no-auto-update: it runs the version installed, never a downloaded one.
    argv: [
      "copilot",
      "--output-format",
      "json",
      "--no-ask-user",
      "--no-auto-update",
      "--usage-output-file",
      "{usage_file}",
    ],
    // File edits unasked; any other tool (its shell) is denied in prompt mode, never prompted.
    edit_mode: ["--allow-tool", "write"],
    bypass: ["--allow-all"],
    tail: [],
    scratch: [],
    prompt: "stdin",
    output: "copilot-jsonl",
    model_flag: "--model",
    sessions: "copilot",
    interactive: {
      argv: ["copilot", "--allow-tool", "write", "--no-auto-update"],
      // 1.0.102 asks about every new folder, and only its own config's trustedFolders (or
      // COPILOT_ALLOW_ALL=true, which also allows every tool) answers up front: --trust-folder is
      // for prompt mode only. The question is the operator's (its first answer trusts the folder
      // for this session alone, nothing saved).
      trust: NO_TRUST,
      // The empty input line: ❯ alone, the input box's lower rule under it.
      waiting: "(^|\\n)\u276f *\\n\u2500{10,}",
      // The footer while a turn runs.
      busy: "esc esc interrupt|\u25ce Working",
      dialogs: [
        {
          screen: "Do you trust the files in this folder\\?",
          asks: "GitHub Copilot asks whether to trust this folder (its first answer trusts it for this session only; the second saves it in ~/.copilot/config.json)",
          answers: [
            { keys: ["1"], picks: "1. Yes (this session only, nothing saved)" },
            { keys: ["3"], picks: "3. No (copilot exits)" },
          ],
        },
      ],
      events: null,
    },
    sandbox: {
      write: ["~/.copilot/"],
      hosts: ["api.githubcopilot.com", "api.individual.githubcopilot.com", "api.github.com"],
    },
    install: "npm install -g @github/copilot",
    docs: {
      prompt_mode_and_flags: "npm @github/copilot@1.0.102: copilot --help; checked in test/agents-real",
      byok_environment:
        "npm @github/copilot@1.0.102: copilot help environment (COPILOT_PROVIDER_BASE_URL, COPILOT_MODEL, COPILOT_OFFLINE)",
      events_and_usage_file:
        "npm @github/copilot@1.0.102: its --output-format json events and --usage-output-file document (test/agents-real)",
      trust:
        "npm @github/copilot@1.0.102: copilot --help (--trust-folder), help environment (COPILOT_ALLOW_ALL)",
      dialog_answers:
        "npm @github/copilot@1.0.102, observed in a tmux pane: the folder question's 1 goes on at once (config.json unchanged), 3 exits",
    },
  },

  cn: {
    binary: "cn",
    // Continue's CLI: `-p` prints the answer and exits, taking the prompt from stdin when no
    // prompt argument is given; `--format json` wraps the answer as {response, status}. -p goes
    // last (the tail), after the permission flags, which each take one tool.
    argv: ["cn", "--format", "json"],
    // Its file tools run unasked; Bash asks, which headless cn refuses rather than waits on.
    edit_mode: ["--allow", "Write", "--allow", "Edit", "--allow", "MultiEdit", "--ask", "Bash"],
    bypass: ["--auto"],
    tail: ["-p"],
    scratch: [],
    prompt: "stdin",
    output: "cn-json",
    // cn's --model adds a model from Continue's hub: the model is the config's (~/.continue/config.yaml).
    model_flag: "--model",
    sessions: "cn",
    interactive: {
      argv: ["cn", "--allow", "Write", "--allow", "Edit", "--allow", "MultiEdit"],
      // No trust question at 1.5.47 (checked with a fresh HOME and worktree).
      trust: NO_TRUST,
      // The empty input box's placeholder (without "@ for context" in some modes).
      waiting: "Ask anything, (@ for context, )?/ for slash commands",
      busy: "esc to interrupt",
      dialogs: [
        {
          screen: "Would you like to continue\\?",
          asks: "Continue CLI asks permission to use a tool",
          answers: [
            { keys: ["y"], picks: "Continue" },
            { keys: ["n"], picks: `No, and tell Continue what to do differently (${NO_THEN_SAY})` },
          ],
        },
      ],
      events: null,
    },
    sandbox: { write: ["~/.continue/"], hosts: ["api.continue.dev", "api.anthropic.com", "api.openai.com"] },
    install: "npm install -g @continuedev/cli",
    docs: {
      print_and_flags: "npm @continuedev/cli@1.5.47: cn --help; checked in test/agents-real",
      output:
        "npm @continuedev/cli@1.5.47: cn -p --format json's object and its error object on stderr (test/agents-real)",
      screens:
        "npm @continuedev/cli@1.5.47 dist/index.js (input placeholder, esc to interrupt, permission prompt)",
      dialog_answers:
        "npm @continuedev/cli@1.5.47 dist/index.js (the permission prompt's keys: y or Tab continue, n or Escape stop)",
    },
  },
};

export function isPresetName(name: string): name is PresetName {
  return (PRESET_NAMES as readonly string[]).includes(name);
}

/** Choices a config makes about a preset; everything else comes from the preset. */
export interface PresetChoices {
  /** Replace the edit mode with the CLI's permission bypass (never on by default). */
  bypass?: boolean;
  /** termorch's sandbox confines it: the edit mode for that, where the CLI has one (`sandbox.edit_mode`). */
  sandboxed?: boolean;
  model?: string;
  /** Flags the config adds, placed before the preset's tail. */
  extra?: readonly string[];
}

/**
 * The preset's non-interactive command line with the config's choices applied, placeholders left in.
 * Order: argv, edit mode (or bypass), model, extra flags, tail.
 */
export function presetArgv(preset: AgentPreset, choices: PresetChoices = {}): string[] {
  // A CLI without a bypass keeps its edit mode (the config refuses asking for one: agentProblems).
  const permission =
    choices.bypass && preset.bypass.length > 0
      ? preset.bypass
      : choices.sandboxed && preset.sandbox.edit_mode
        ? preset.sandbox.edit_mode
        : preset.edit_mode;
  const model = choices.model === undefined ? [] : [preset.model_flag, choices.model];
  return [...preset.argv, ...permission, ...model, ...(choices.extra ?? []), ...preset.tail];
}
