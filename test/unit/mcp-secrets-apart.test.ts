import { describe, expect, it } from "vitest";
import { secretsApart } from "../../src/mcp/secrets-apart.js";

const isSecret = (name: string): boolean => /TOKEN|KEY/.test(name);

describe("secretsApart (an inline document written down without its secret values)", () => {
  it("turns a secret's NAME=VALUE into NAME and hands the value over apart", () => {
    const doc = {
      environment: { workspace_dir: ".", env_vars: ["API_TOKEN=s3cret=x", "MODE=fast", "HOME"] },
      tasks: [],
    };
    const apart = secretsApart(doc, isSecret);
    expect(apart.doc).toEqual({
      environment: { workspace_dir: ".", env_vars: ["API_TOKEN", "MODE=fast", "HOME"] },
      tasks: [],
    });
    expect(apart.env).toEqual({ API_TOKEN: "s3cret=x" });
    expect(apart.problems).toEqual([]);
    expect(JSON.stringify(apart.doc)).not.toContain("s3cret");
    // The caller's document is not changed.
    expect(doc.environment.env_vars[0]).toBe("API_TOKEN=s3cret=x");
  });

  it("refuses a secret in a task's env, which has no pass-through form, and leaves malformed parts to validation", () => {
    const apart = secretsApart(
      {
        environment: { env_vars: [3, "X=1"] },
        tasks: [{ id: "a", env: { OPENAI_KEY: "k", PLAIN: "p" } }, "junk"],
      },
      isSecret,
    );
    expect(apart.problems).toEqual([
      { field: "tasks[0].env.OPENAI_KEY", message: expect.stringMatching(/secret's name/) },
    ]);
    expect(apart.doc.environment).toEqual({ env_vars: [3, "X=1"] });
    expect(apart.env).toEqual({});
  });
});
