import { chmodSync, renameSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { daemonTestFile } from "./daemon-harness.js";
import { waitFor } from "./harness.js";

const { home, startDaemon, ready, job, answer, readAnswer } = daemonTestFile("daemon-claim-mode");

// An inbox file dropped 0644 (a default umask) may name secrets in env_vars; once the daemon
// moved it into the run folder it stayed readable by every user (the isolation campaign).
describe("daemon claim", () => {
  it("makes the claimed assignments file owner-only", async () => {
    const h = home();
    startDaemon(h);
    await ready(h);
    const j = job(h, "modes", [{ id: "A" }]);
    j.body.environment.env_vars = ["API_TOKEN=s3cr3t-value-123456"];
    const tmp = join(h, "modes.tmp");
    writeFileSync(tmp, JSON.stringify(j.body));
    chmodSync(tmp, 0o644);
    renameSync(tmp, join(h, "inbox", "modes.json"));
    await waitFor(() => statSync(answer(h, "modes"), { throwIfNoEntry: false }), 60_000, "the answer");
    expect(readAnswer(h, "modes").summary.completed).toBe(true);
    expect(statSync(join(h, "runs", "modes", "assignments.json")).mode & 0o777).toBe(0o600);
  });
});
