// The daemon's claim of an inbox file and its recovery of a run claimed before a crash, in-process:
// claim() on real files, and a Daemon whose runs take the fake runner and a workspace that is not
// a repository (DaemonOptions.drive). These used to start a daemon process and a real run each
// (test/integration/daemon-claim-mode, daemon-damaged-claim); what needs a real process (a crash
// at a fault point, SIGTERM, adoption of live agents) stays in test/integration/daemon-*.
import { chmodSync, mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import pino from "pino";
import { describe, expect, it } from "vitest";
import { Report } from "../../src/contract/report.js";
import { claim } from "../../src/daemon/claim.js";
import { Daemon } from "../../src/daemon/daemon.js";
import { FakeRunner } from "./fake-runner.js";
import { MiddleRun, middleTier, PLAIN_WORKSPACE } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

/** The run's assignments as a daemon's inbox file would hold them, `workspace_dir` relative to `from`. */
function body(from: string): Record<string, unknown> {
  const a = JSON.parse(readFileSync(run.file, "utf8"));
  return { ...a, environment: { ...a.environment, workspace_dir: relative(from, join(run.dir, "ws")) } };
}

describe("daemon claim", () => {
  // An inbox file dropped 0644 (a default umask) may name secrets in env_vars; once the daemon
  // moved it into the run folder it stayed readable by every user (the isolation campaign).
  it("makes the claimed assignments file owner-only", async () => {
    run = new MiddleRun([{ id: "A" }]);
    const [inbox, runs] = [join(run.dir, "inbox"), join(run.dir, "runs")];
    mkdirSync(inbox);
    mkdirSync(runs);
    const dropped = join(inbox, "modes.json");
    writeFileSync(dropped, JSON.stringify({ ...body(inbox), run_id: "modes" }));
    chmodSync(dropped, 0o644);
    const claimed = await claim(dropped, runs);
    expect(claimed).toMatchObject({ runId: "modes", source: dropped });
    expect(statSync(join(runs, "modes", "assignments.json")).mode & 0o777).toBe(0o600);
  });

  // The first version chmodded through a link: the input campaign drops links to /dev/zero and
  // /dev/null in the inbox, and the machine's /dev/null became 0600.
  it("leaves the mode of what a dropped link points to alone", async () => {
    run = new MiddleRun([{ id: "A" }]);
    const [inbox, runs] = [join(run.dir, "inbox"), join(run.dir, "runs")];
    mkdirSync(inbox);
    mkdirSync(runs);
    const victim = join(run.dir, "victim.json");
    writeFileSync(victim, JSON.stringify({ ...body(inbox), run_id: "linked" }));
    chmodSync(victim, 0o644);
    symlinkSync(victim, join(inbox, "linked.json"));
    expect(await claim(join(inbox, "linked.json"), runs)).toMatchObject({ runId: "linked" });
    expect(statSync(victim).mode & 0o777).toBe(0o644);
  });
});

describe("a daemon restarted over a run claimed before a crash", () => {
  for (const [what, text] of [
    ["a claim record whose source is not a path", '{"source":5,"claimed_at":"t","pid":1}'],
    ["an empty object", "{}"],
    ["a half-written record", '{"source":"/x'],
    ["no claim record at all", null],
  ] as const) {
    it(`runs it when its claim.json is damaged (${what}), the workspace relative to the inbox`, async () => {
      run = new MiddleRun([{ id: "A" }]);
      const home = join(run.dir, "home");
      // What a daemon that died between the claim and the run's start left behind.
      const runDir = join(home, "runs", "claimed");
      mkdirSync(runDir, { recursive: true });
      writeFileSync(join(runDir, "assignments.json"), JSON.stringify(body(join(home, "inbox"))));
      if (text !== null) writeFileSync(join(runDir, "claim.json"), text);
      const log: string[] = [];
      const daemon = new Daemon({
        home,
        env: run.options().env!,
        log: pino({ level: "info" }, { write: (line: string) => void log.push(line) }),
        drive: { runner: new FakeRunner(run.host), workspace: PLAIN_WORKSPACE },
      });
      run.host.onLaunch = (attempt) => attempt.exit(0);
      await daemon.start();
      // The recovered run is driven by then: idle once it was answered.
      await daemon.idle();
      await daemon.stop();
      const answer = Report.parse(JSON.parse(readFileSync(join(home, "outbox", "claimed.json"), "utf8")));
      expect(answer).toMatchObject({ error: null, summary: { completed: true } });
      // The task ran in the workspace the file names relative to the inbox.
      expect(run.host.attempts.map((a) => a.spec.cwd)).toEqual([join(run.dir, "ws")]);
      const said = log.join("");
      expect(said).toContain("starting a run claimed before a crash");
      if (text !== null) {
        expect(said).toContain("damaged claim record");
        expect(said).toContain("claim.json");
      }
    });
  }
});
