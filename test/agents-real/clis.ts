import type { Protocol } from "./model-server.js";

/**
 * How each pinned CLI is pointed at the scripted model server, as a user would configure it in
 * termorch's config: an agent entry of the preset's name with `env` (base URL, key) and `args`
 * (per-invocation overrides). Nothing is written into the CLI's own files in HOME.
 */
export interface CliRecipe {
  preset: "claude" | "codex" | "gemini" | "opencode";
  protocol: Protocol;
  /** The config's agent entry for this preset, pointed at the server. */
  agent(url: string): { env: Record<string, string>; args?: string[] };
  /**
   * The API key, in termorch's own environment under this name and passed to the agent by name
   * (`environment.env_vars`), as a user passes a secret; it must never reach a file termorch writes.
   */
  keyVar: string;
}

export const SECRET = "sk-termorch-test-7f3a9c1e5b";

export const RECIPES: Record<CliRecipe["preset"], CliRecipe> = {
  claude: {
    preset: "claude",
    protocol: "anthropic",
    keyVar: "ANTHROPIC_API_KEY",
    agent: (url) => ({
      env: {
        ANTHROPIC_BASE_URL: url,
        // No telemetry, error reports or update checks: nothing but the model server is asked.
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
        // One try per request: a failure test need not wait out its retries.
        CLAUDE_CODE_MAX_RETRIES: "0",
      },
    }),
  },
  codex: {
    preset: "codex",
    protocol: "responses",
    keyVar: "TERMORCH_TEST_KEY",
    agent: (url) => ({
      env: {},
      args: [
        "-c",
        "model_provider=termorch-test",
        "-c",
        `model_providers.termorch-test={name="termorch-test", base_url="${url}/v1", env_key="TERMORCH_TEST_KEY", wire_api="responses", request_max_retries=0, stream_max_retries=0}`,
        "-c",
        "model=gpt-5",
      ],
    }),
  },
  gemini: {
    preset: "gemini",
    protocol: "gemini",
    keyVar: "GEMINI_API_KEY",
    agent: (url) => ({
      env: {
        GOOGLE_GEMINI_BASE_URL: url,
        GEMINI_DEFAULT_AUTH_TYPE: "gemini-api-key",
      },
    }),
  },
  opencode: {
    preset: "opencode",
    protocol: "chat",
    keyVar: "TERMORCH_TEST_KEY",
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
      },
    }),
  },
};
