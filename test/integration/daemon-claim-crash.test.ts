import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { daemonTestFile } from "./daemon-harness.js";
import { waitFor } from "./harness.js";

const { home, startDaemon, logOf, job, answer, readAnswer } = daemonTestFile("daemon-claim-crash");

// A claim moves the inbox file into runs/<id>/assignments.json, then writes claim.json: a daemon
// SIGKILLed between the two left a run no restart took (not in the inbox any more, and without the
// claim record recovery looked for), so it was never run nor answered. Seen by the crash campaign
// (a random SIGKILL of the daemon right after a drop) as a run not answered after the restart.
describe("a daemon killed between moving an inbox file in and recording the claim", () => {
  it("runs it on the next start, the workspace relative to the inbox", async () => {
    const h = home();
    const id = "moved";
    const j = job(h, id, [{ id: "A" }]);
    const runDir = join(h, "runs", id);
    mkdirSync(runDir, { recursive: true });
    j.body.environment.workspace_dir = relative(join(h, "inbox"), j.ws.repo);
    writeFileSync(join(runDir, "assignments.json"), JSON.stringify(j.body));
    void startDaemon(h);
    await waitFor(() => existsSync(answer(h, id)), 20_000, "the answer");
    expect(readAnswer(h, id)).toMatchObject({ error: null, summary: { completed: true } });
    expect(logOf(h)).toContain("starting a run claimed before a crash");
  });
});
