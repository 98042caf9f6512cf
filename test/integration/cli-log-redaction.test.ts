import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("cli-log-redaction");

// Long, unlike anything termorch prints by itself.
const RUN_SECRET = "run-secret-8c41f2d9e7";
const ENV_SECRET = "env-secret-5b3a90c6d1";

describe("the CLI's terminal log", () => {
  it("warns when the run cannot be registered, with the run's and the environment's secrets redacted", async () => {
    const { dir } = workspace();
    // A file where the registry's folder should be: registering fails with an error naming the
    // path, and the path carries both secrets.
    const blocker = join(dir, `${ENV_SECRET}-${RUN_SECRET}`);
    writeFileSync(blocker, "");
    const file = writeAssignments(dir, [{ id: "a" }], {
      environment: { env_vars: [`DEPLOY_TOKEN=${RUN_SECRET}`] },
    });
    const result = await termorch(["run", "--debug", file], {
      socket,
      env: { TERMORCH_REGISTRY: join(blocker, "runs"), MY_API_TOKEN: ENV_SECRET },
    });
    // Not being findable by `termorch status <id>` does not fail the run.
    expect(result.exitCode).toBe(0);
    expect(readReport(dir).summary.completed).toBe(true);
    expect(result.stderr).toContain("could not register the run");
    expect(result.stderr).toContain("[REDACTED]");
    expect(result.stderr).not.toContain(RUN_SECRET);
    expect(result.stderr).not.toContain(ENV_SECRET);
  });
});
