import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import type { Protocol } from "./model-server.js";

/** The pinned CLIs' programs (harness.ts's CLI_BIN; not imported from there, which imports this file). */
const CLI_BIN = join(resolve(dirname(fileURLToPath(import.meta.url))), "node_modules", ".bin");

/**
 * How each pinned CLI is pointed at the scripted model server, as a user would configure it in
 * termorch's config: an agent entry of the preset's name with `env` (base URL, key) and `args`
 * (per-invocation overrides). Nothing is written into the CLI's own files in HOME.
 */
export interface CliRecipe {
  preset: "claude" | "codex" | "gemini" | "opencode" | "qwen" | "kilo" | "pi" | "copilot" | "cn";
  protocol: Protocol;
  /** The config's agent entry for this preset, pointed at the server. */
  agent(url: string): { env: Record<string, string>; args?: string[] };
  /**
   * The API key, in termorch's own environment under this name and passed to the agent by name
   * (`environment.env_vars`), as a user passes a secret; it must never reach a file termorch writes.
   */
  keyVar: string;
  /**
   * What a user of this CLI has in HOME after its first start, before termorch is involved (the
   * CLI writes it on every start otherwise, which the HOME snapshot would count).
   */
  seedHome?(home: string, url: string): void;
  /** What the CLI asks before its first interactive prompt in any new folder, which only its user may answer. */
  asksFirst?: RegExp;
  /** Environment the interactive tests add to the agent entry's (see cn). */
  interactiveEnv?: Record<string, string>;
  /**
   * A model name the config's `model` may give it, as the CLI then names it to the server; null:
   * its `--model` is not a model's name (cn's takes a Continue hub slug).
   */
  model: { config: string; sent: string } | null;
}

export const SECRET = "sk-termorch-test-7f3a9c1e5b";

let withoutBwrap: string | null = null;
/** The pinned CLIs, then a folder of links to every program of the system's PATH but bwrap. */
function pathWithoutBwrap(): string {
  if (withoutBwrap === null) {
    const bin = mkdtempSync(join(tmpdir(), "termorch-path-"));
    process.once("exit", () => rmSync(bin, { recursive: true, force: true }));
    for (const dir of [dirname(process.execPath), "/usr/local/bin", "/usr/bin", "/bin"])
      for (const name of existsSync(dir) ? readdirSync(dir) : [])
        if (name !== "bwrap" && !existsSync(join(bin, name))) symlinkSync(join(dir, name), join(bin, name));
    withoutBwrap = [CLI_BIN, bin].join(":");
  }
  return withoutBwrap;
}

export const RECIPES: Record<CliRecipe["preset"], CliRecipe> = {
  claude: {
    preset: "claude",
    model: { config: "claude-termorch-test", sent: "claude-termorch-test" },
    protocol: "anthropic",
    keyVar: "ANTHROPIC_API_KEY",
    // A user who has run Claude Code before: its first-run set-up done, and the API key in
    // ANTHROPIC_API_KEY approved when the TUI asked (it asks once per key).
    seedHome(home) {
      writeFileSync(
        join(home, ".claude.json"),
        JSON.stringify({
          hasCompletedOnboarding: true,
          customApiKeyResponses: { approved: [SECRET.slice(-20)], rejected: [] },
        }),
      );
    },
    agent: (url) => ({
      env: {
        ANTHROPIC_BASE_URL: url,
        // No telemetry, error reports or update checks: nothing but the model server is asked.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        // One try per request: a failure test need not wait out its retries.
        CLAUDE_CODE_MAX_RETRIES: "0",
        // The TUI's marketplace install looks up github.com and claude.ai otherwise.
        CLAUDE_CODE_DISABLE_OFFICIAL_MARKETPLACE_AUTOINSTALL: "1",
      },
    }),
  },
  codex: {
    preset: "codex",
    // In codex's catalog (its tools include apply_patch); the agent entry's own `-m` names it too.
    model: { config: "gpt-5.5", sent: "gpt-5.5" },
    protocol: "responses",
    keyVar: "TERMORCH_TEST_KEY",
    // codex 0.171 writes this on each TUI start unless it is there.
    seedHome(home) {
      mkdirSync(join(home, ".codex"), { recursive: true });
      writeFileSync(join(home, ".codex", "config.toml"), "[tui]\nscreen_reader_detection_done = true\n");
    },
    // codex's own sandbox takes the system's bubblewrap when it finds one on PATH (CI installs it for
    // termorch's sandbox), and 0.171 cannot work with Debian 12's 0.8: every edit fails ("Failed to
    // write file"). This user's PATH has everything but bwrap, so codex takes the one it bundles.
    agent: (url) => ({
      env: { PATH: pathWithoutBwrap() },
      args: [
        "-c",
        "model_provider=termorch-test",
        "-c",
        `model_providers.termorch-test={name="termorch-test", base_url="${url}/v1", env_key="TERMORCH_TEST_KEY", wire_api="responses", request_max_retries=0, stream_max_retries=0}`,
        // In codex's catalog, so its tools include apply_patch (an unknown model gets only a shell).
        "-m",
        "gpt-5.5",
        // Nothing but the model server: no analytics, plugins' lookups or update check.
        "-c",
        "analytics.enabled=false",
        "-c",
        "features.plugins=false",
        "-c",
        "check_for_update_on_startup=false",
        // The TUI offers gpt-5.5's successor at start (taking it rewrites config.toml): this user
        // has seen the offer, as a user who answered it once has.
        "-c",
        'notice.model_migrations={"gpt-5.5"="gpt-6-sol"}',
        "-c",
        'tui.model_availability_nux={"gpt-6.1-sol"=99}',
        "-c",
        "tui.animations=false",
      ],
    }),
  },
  gemini: {
    preset: "gemini",
    model: { config: "gemini-termorch-test", sent: "gemini-termorch-test" },
    protocol: "gemini",
    keyVar: "GEMINI_API_KEY",
    // A user who chose "Gemini API key" as gemini's sign-in. Without a choice in settings, 0.61
    // takes GOOGLE_GEMINI_BASE_URL for a "gateway" sign-in and refuses it (exit 41); its
    // per-invocation system settings file is refused under a world-writable /tmp.
    seedHome(home) {
      mkdirSync(join(home, ".gemini"), { recursive: true });
      writeFileSync(
        join(home, ".gemini", "settings.json"),
        JSON.stringify({
          security: { auth: { selectedType: "gemini-api-key" } },
          // Nothing but the model server: no usage statistics (play.googleapis.com), no update
          // check; and one try per request (0.61 retries a 429 or a 500 for minutes otherwise).
          privacy: { usageStatisticsEnabled: false },
          general: { enableAutoUpdate: false, enableAutoUpdateNotification: false, maxAttempts: 1 },
        }),
      );
    },
    agent: (url) => ({
      env: { GOOGLE_GEMINI_BASE_URL: url },
    }),
  },
  opencode: {
    preset: "opencode",
    model: { config: "termorch-test/test-model", sent: "test-model" },
    protocol: "chat",
    keyVar: "TERMORCH_TEST_KEY",
    // opencode 1.18 writes this on each start unless it is there.
    seedHome(home) {
      mkdirSync(join(home, ".config", "opencode"), { recursive: true });
      writeFileSync(
        join(home, ".config", "opencode", ".gitignore"),
        "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore",
      );
    },
    agent: (url) => ({
      env: {
        OPENCODE_CONFIG_CONTENT: JSON.stringify({
          provider: {
            "termorch-test": {
              npm: "@ai-sdk/openai-compatible",
              options: { baseURL: `${url}/v1`, apiKey: "{env:TERMORCH_TEST_KEY}" },
              models: { "test-model": {} },
            },
          },
          model: "termorch-test/test-model",
          autoupdate: false,
          share: "disabled",
        }),
        OPENCODE_DISABLE_AUTOUPDATE: "1",
        // Nothing but the model server: no models.dev list, no LSP or plugin downloads.
        OPENCODE_DISABLE_MODELS_FETCH: "1",
        OPENCODE_DISABLE_LSP_DOWNLOAD: "1",
        npm_config_offline: "true",
      },
    }),
  },
  qwen: {
    preset: "qwen",
    model: { config: "qwen-termorch-test", sent: "qwen-termorch-test" },
    protocol: "chat",
    keyVar: "OPENAI_API_KEY",
    agent: (url) => ({
      env: { OPENAI_BASE_URL: `${url}/v1`, OPENAI_MODEL: "termorch-test-model" },
      // Its OpenAI-compatible sign-in, chosen per invocation.
      args: ["--auth-type", "openai"],
    }),
  },
  kilo: {
    preset: "kilo",
    model: { config: "termorch-test/test-model", sent: "test-model" },
    protocol: "chat",
    keyVar: "TERMORCH_TEST_KEY",
    agent: (url) => ({
      env: {
        KILO_CONFIG_CONTENT: JSON.stringify({
          provider: {
            "termorch-test": {
              npm: "@ai-sdk/openai-compatible",
              options: { baseURL: `${url}/v1`, apiKey: "{env:TERMORCH_TEST_KEY}" },
              models: { "test-model": { tool_call: true } },
            },
          },
          model: "termorch-test/test-model",
          autoupdate: false,
          share: "disabled",
        }),
        KILO_DISABLE_AUTOUPDATE: "1",
        KILO_DISABLE_MODELS_FETCH: "1",
        npm_config_offline: "true",
      },
    }),
  },
  pi: {
    preset: "pi",
    model: { config: "test-model", sent: "test-model" },
    protocol: "chat",
    keyVar: "TERMORCH_TEST_KEY",
    // pi's providers are in its own file; this user has the model server there, and has started
    // pi once (0.73 writes these on its first start).
    seedHome(home, url) {
      mkdirSync(join(home, ".pi", "agent"), { recursive: true });
      writeFileSync(join(home, ".pi", "agent", "settings.json"), '{\n  "lastChangelogVersion": "0.73.1"\n}');
      writeFileSync(join(home, ".pi", "agent", "auth.json"), "{}", { mode: 0o600 });
      writeFileSync(
        join(home, ".pi", "agent", "models.json"),
        JSON.stringify({
          providers: {
            "termorch-test": {
              baseUrl: `${url}/v1`,
              api: "openai-completions",
              apiKey: "TERMORCH_TEST_KEY",
              compat: { supportsDeveloperRole: false, supportsReasoningEffort: false },
              models: [{ id: "test-model" }],
            },
          },
        }),
      );
    },
    agent: () => ({
      // No downloads of fd and ripgrep at start.
      env: { PI_OFFLINE: "1" },
      args: ["--provider", "termorch-test"],
    }),
  },
  copilot: {
    preset: "copilot",
    model: { config: "copilot-termorch-test", sent: "copilot-termorch-test" },
    protocol: "chat",
    keyVar: "COPILOT_PROVIDER_API_KEY",
    // What 1.0.102 writes in its config on its first start.
    seedHome(home) {
      mkdirSync(join(home, ".copilot"), { recursive: true });
      writeFileSync(
        join(home, ".copilot", "config.json"),
        '// User settings belong in settings.json.\n// This file is managed automatically.\n{\n  "firstLaunchAt": "2026-11-26T21:21:43.680Z",\n  "appTipShown": true,\n  "reasoningSummariesCleanupDone": true\n}\n',
      );
    },
    // Its folder trust: no flag or setting of the invocation answers it in its TUI.
    asksFirst: /trust this folder/,
    agent: (url) => ({
      env: {
        // Its own provider ("bring your own key"): no GitHub sign-in is needed.
        COPILOT_PROVIDER_BASE_URL: `${url}/v1`,
        COPILOT_MODEL: "test-model",
        // Nothing but the model server: no sign-in, telemetry, web tools or update.
        COPILOT_OFFLINE: "true",
      },
    }),
  },
  cn: {
    preset: "cn",
    model: null,
    protocol: "chat",
    keyVar: "TERMORCH_TEST_KEY",
    // A user with the model server in cn's config (its key from the environment, as Continue's
    // secrets resolve), who turned its self-update off; and the permissions file cn writes on its
    // first start.
    seedHome(home, url) {
      mkdirSync(join(home, ".continue"), { recursive: true });
      writeFileSync(
        join(home, ".continue", "config.yaml"),
        `name: termorch-test\nversion: 1.0.0\nschema: v1\nmodels:\n  - name: test\n    provider: openai\n    model: test-model\n    apiBase: ${url}/v1\n    apiKey: \${{ secrets.TERMORCH_TEST_KEY }}\n`,
      );
      writeFileSync(join(home, ".continue", "globalContext.json"), '{\n  "autoUpdateCli": false\n}');
      writeFileSync(
        join(home, ".continue", "permissions.yaml"),
        "# cn tool permissions\n\n# Tools that are automatically allowed without prompting\nallow: []\n\n# Tools that require user confirmation before execution\nask: []\n\n# Tools that are completely excluded (model won't know they exist)\nexclude: []\n",
      );
    },
    agent: () => ({ env: {} }),
    // cn's TUI asks api.continue.dev for its newest version on every start, and only
    // NODE_ENV=test stops it (which also stops headless cn from reading its prompt on stdin).
    interactiveEnv: { NODE_ENV: "test" },
  },
};
