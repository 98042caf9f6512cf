import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { daemonTestFile } from "./daemon-harness.js";
import { waitFor } from "./harness.js";

const { home, startDaemon, logOf, job, answer, readAnswer } = daemonTestFile("daemon-damaged-claim");

describe("a daemon restarted over a run claimed before a crash", () => {
  for (const [what, text] of [
    ["a claim record whose source is not a path", '{"source":5,"claimed_at":"t","pid":1}'],
    ["an empty object", "{}"],
    ["a half-written record", '{"source":"/x'],
  ] as const) {
    it(`runs it when its claim.json is damaged (${what}), the workspace relative to the inbox`, async () => {
      const h = home();
      const id = "claimed";
      const j = job(h, id, [{ id: "A" }]);
      // What a daemon that died between the claim and the run's start left behind.
      const runDir = join(h, "runs", id);
      mkdirSync(runDir, { recursive: true });
      j.body.environment.workspace_dir = relative(join(h, "inbox"), j.ws.repo);
      writeFileSync(join(runDir, "assignments.json"), JSON.stringify(j.body));
      writeFileSync(join(runDir, "claim.json"), text);
      void startDaemon(h);
      await waitFor(() => existsSync(answer(h, id)), 60_000, "the answer");
      expect(readAnswer(h, id)).toMatchObject({ error: null, summary: { completed: true } });
      expect(logOf(h)).toContain("damaged claim record");
      expect(logOf(h)).toContain("claim.json");
    });
  }
});
