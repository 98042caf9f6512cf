import { chmodSync, renameSync, statSync, symlinkSync, writeFileSync } from "node:fs";
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

  // The first version chmodded through a link: the input campaign drops links to /dev/zero and
  // /dev/null in the inbox, and the machine's /dev/null became 0600.
  it("leaves the mode of what a dropped link points to alone", async () => {
    const h = home();
    startDaemon(h);
    await ready(h);
    const j = job(h, "linked", [{ id: "A" }]);
    const victim = join(h, "victim.json");
    writeFileSync(victim, JSON.stringify(j.body));
    chmodSync(victim, 0o644);
    symlinkSync(victim, join(h, "inbox", "linked.json"));
    await waitFor(() => statSync(answer(h, "linked"), { throwIfNoEntry: false }), 60_000, "the answer");
    expect(statSync(victim).mode & 0o777).toBe(0o644);
  });
});
