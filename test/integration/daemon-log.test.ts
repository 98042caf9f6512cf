import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { daemonTestFile } from "./daemon-harness.js";
import { waitFor } from "./harness.js";

const { home, startDaemon, logOf, ready, job, answer, readAnswer } = daemonTestFile("daemon-log");

/** The log's lines as objects; a line whose keys repeat does not survive the round trip. */
function entries(text: string): Array<Record<string, unknown>> {
  return text
    .trim()
    .split("\n")
    .map((line) => {
      const entry = JSON.parse(line) as Record<string, unknown>;
      expect(JSON.stringify(entry), "a log line with a repeated key").toBe(line);
      return entry;
    });
}

describe("daemon log", () => {
  it("says a run running at SIGTERM was detached and a waiting one left queued, each key once", async () => {
    const h = home();
    const d = startDaemon(h, "--max-runs", "1");
    await ready(h);
    const gate = join(h, "go");
    job(h, "busy", [{ id: "L", env: { WAIT_FILE: gate } }]).drop();
    await waitFor(() => existsSync(join(h, "runs", "busy", "status", "L.running")), 30_000, "L running");
    // A second run waits for the one run slot.
    job(h, "later", [{ id: "M" }]).drop();
    await waitFor(() => logOf(h).includes('"run":"later","source"'), 30_000, "the second run claimed");
    d.kill("SIGTERM");
    expect((await d).exitCode).toBe(0);
    const log = entries(logOf(h));
    const first = log[0]!;
    expect(first.msg).toBe("daemon starting");
    expect(
      logOf(h)
        .split("\n")[0]!
        .match(/"pid":/g),
    ).toHaveLength(1);
    expect(first.pid).toBe(d.pid);
    const about = log.filter((e) => e.run === "busy").map((e) => e.msg);
    expect(about).toContain("run detached: its agents keep running, the next start resumes it");
    expect(about.join("\n")).not.toMatch(/queued/);
    expect(log.filter((e) => e.run === "later").map((e) => e.msg)).toContain(
      "run left queued; it starts on the next start",
    );
    // It was really left to resume: the run detached before the daemon said it stopped.
    const msgs = log.map((e) => e.msg);
    expect(msgs.indexOf("daemon stopped")).toBeGreaterThan(
      msgs.indexOf("run detached: its agents keep running, the next start resumes it"),
    );
    void startDaemon(h);
    writeFileSync(gate, "");
    await waitFor(
      () => existsSync(answer(h, "busy")) && existsSync(answer(h, "later")),
      30_000,
      "the answers after the restart",
    );
    expect(readAnswer(h, "busy").summary.completed).toBe(true);
    expect(readAnswer(h, "later").summary.completed).toBe(true);
  });
});
