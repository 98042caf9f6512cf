import { describe, expect, it } from "vitest";
import { agentEnvironment } from "../../src/agent/environment.js";
import { Config } from "../../src/contract/config.js";
import { isSecretName, REDACTED, Redactor } from "../../src/redact/redactor.js";

describe("redaction", () => {
  it("removes secret values, token formats and configured patterns", () => {
    const r = Redactor.from(["(?i)internal-[a-z]+"], ["s3cr3t-value$(x)"]);
    const text =
      "key=s3cr3t-value$(x) gh=ghp_abcdefghijklmnopqrstuvwxyz0123456789 Authorization: Bearer abc.def-ghi123 INTERNAL-zone ok";
    expect(r.redact(text)).toBe("key=[REDACTED] gh=[REDACTED] Authorization: [REDACTED] [REDACTED] ok");
  });

  it("ignores values too short to be secrets", () => {
    expect(Redactor.from([], ["1"]).redact("a1b")).toBe("a1b");
  });

  it("redacts every string inside a JSON value", () => {
    const r = Redactor.from([], ["hunter22"]);
    expect(r.redactDeep({ a: ["x hunter22"], b: { c: "hunter22" }, n: 3 })).toEqual({
      a: ["x [REDACTED]"],
      b: { c: "[REDACTED]" },
      n: 3,
    });
  });

  it("escapes secret values so they match themselves and keep one pattern per line", () => {
    const literal = "a.b*c\n(d)[e]{f}|g\\h^$";
    const r = Redactor.from([], [literal]);
    for (const source of r.sources) expect(source).not.toContain("\n");
    // Line by line (src/redact/RULES.md): each line of a multi-line value is a secret of its own.
    expect(r.redact(`<${literal}>`)).toBe(`<${REDACTED}\n${REDACTED}>`);
    // Each line escaped: a lookalike of both lines is left alone.
    const lookalike = literal.replace(".", "X").replace("(d)", "(D)");
    expect(r.redact(lookalike)).toBe(lookalike);
  });

  it("recognises secret-looking names", () => {
    expect(isSecretName("ANTHROPIC_API_KEY", ["KEY"])).toBe(true);
    expect(isSecretName("github_token", ["TOKEN"])).toBe(true);
    expect(isSecretName("MODE", ["KEY"])).toBe(false);
    expect(isSecretName("MODE", ["KEY"], ["MODE"])).toBe(true);
  });
});

describe("agent environment", () => {
  it("is the base, named env_vars, task env and TERMORCH_* and nothing else", () => {
    const { env, secrets } = agentEnvironment({
      processEnv: { PATH: "/bin", HOME: "/h", OTHER: "leak", API_TOKEN: "tok-1234", SSH_AUTH_SOCK: "/x" },
      envVars: ["API_TOKEN", "MODE=ci", "MISSING"],
      agentEnv: {},
      taskEnv: { LEVEL: "2" },
      termorch: { TERMORCH_TASK_ID: "A" },
      config: Config.parse({}),
    });
    expect(env).toEqual({
      PATH: "/bin",
      HOME: "/h",
      TERM: "xterm-256color",
      API_TOKEN: "tok-1234",
      MODE: "ci",
      LEVEL: "2",
      TERMORCH_TASK_ID: "A",
    });
    expect(secrets).toEqual(["tok-1234"]);
  });
});
