import type { PresetName } from "../contract/config.js";
import type { OutputFormat } from "./results.js";

/**
 * The coding-agent CLIs termorch runs by name, each in its documented non-interactive mode with
 * the CLI's edit-in-workspace permissions (never a bypass unless the config asks). Where each
 * flag and output field comes from: docs/agents.md.
 */
export interface Preset {
  /** The executable, looked up on the agent's PATH at validation. */
  binary: string;
  /** The command line before the prompt (placeholders as in a config agent's `command`). */
  argv: readonly string[];
  /** After the flags a config adds (e.g. codex's `-`: read the prompt from stdin). */
  tail: readonly string[];
  /**
   * How the prompt reaches it: on standard input, or in the file `{prompt_file}` names. Never
   * as one argument: Linux limits one to 128 KiB (MAX_ARG_STRLEN), and context files can be larger.
   */
  prompt: "stdin" | "file";
  output: OutputFormat;
  /** The CLI's flag(s) that skip every permission check: only with `dangerously_bypass_permissions`. */
  bypass: readonly string[];
  modelFlag: string;
  /** What to install when the binary is missing. */
  install: string;
}

export const PRESETS: Readonly<Record<PresetName, Preset>> = {
  claude: {
    binary: "claude",
    argv: ["claude", "-p", "--output-format", "json", "--permission-mode", "acceptEdits"],
    tail: [],
    prompt: "stdin",
    output: "claude-json",
    bypass: ["--dangerously-skip-permissions"],
    modelFlag: "--model",
    install: "Claude Code: npm install -g @anthropic-ai/claude-code",
  },
  codex: {
    binary: "codex",
    argv: ["codex", "exec", "--json", "--sandbox", "workspace-write"],
    tail: ["-"],
    prompt: "stdin",
    output: "codex-jsonl",
    bypass: ["--dangerously-bypass-approvals-and-sandbox"],
    modelFlag: "--model",
    install: "the Codex CLI: npm install -g @openai/codex",
  },
  aider: {
    binary: "aider",
    argv: [
      "aider",
      "--message-file",
      "{prompt_file}",
      "--yes-always",
      "--no-auto-commits",
      "--no-check-update",
    ],
    tail: [],
    prompt: "file",
    output: "aider-text",
    bypass: [],
    modelFlag: "--model",
    install: "aider: python -m pip install aider-install && aider-install",
  },
  gemini: {
    binary: "gemini",
    argv: ["gemini", "--output-format", "json", "--approval-mode", "auto_edit"],
    tail: [],
    prompt: "stdin",
    output: "gemini-json",
    bypass: ["--yolo"],
    modelFlag: "--model",
    install: "the Gemini CLI: npm install -g @google/gemini-cli",
  },
  opencode: {
    binary: "opencode",
    argv: ["opencode", "run", "--format", "json"],
    tail: [],
    prompt: "stdin",
    output: "opencode-jsonl",
    bypass: [],
    modelFlag: "--model",
    install: "OpenCode: npm install -g opencode-ai",
  },
};
