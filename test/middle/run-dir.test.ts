// Where a run's files go when a folder already holds another run's, driven through runAssignments
// with the fake runner and a workspace that is not a repository: a second run into it is refused
// and changes nothing, a folder of its own runs it, and a dry run never writes over a real run's
// report. These used to take real runs (test/integration/run-dir); that file keeps the folders a
// git work tree decides (ignored, inside the work tree, through a symlink) and the live lock.
import { mkdirSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { runAssignments } from "../../src/run/runner.js";
import { MiddleRun, middleTier } from "./harness.js";

let run: MiddleRun;

middleTier(() => run);

const reportText = (): string => readFileSync(join(run.dir, "execution_report.json"), "utf8");

describe("a folder that holds another run's files", () => {
  it("refuses a second run into it and changes nothing; with a folder of its own, the run goes", async () => {
    run = new MiddleRun([{ id: "A" }]);
    run.host.onLaunch = (attempt) => attempt.exit(0);
    const first = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(first.exit_code).toBe(0);
    const before = reportText();
    const status = readdirSync(join(run.dir, "status")).sort();

    const second = run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() }));
    expect(second.exit_code).toBe(2);
    // What the CLI prints: the message, then the hint.
    const said = `${second.error?.message}\n${second.error?.hint}`;
    expect(said).toContain(`holds the files of run ${first.run_id} (finished)`);
    expect(said).toContain("--out");
    expect(run.host.attempts).toHaveLength(1);
    expect(reportText()).toBe(before);
    expect(readdirSync(join(run.dir, "status")).sort()).toEqual(status);

    const out = join(run.dir, "second");
    mkdirSync(out);
    const third = run.report(
      await runAssignments({ assignmentsFile: run.file, outDir: out, ...run.options() }),
    );
    expect(third.exit_code).toBe(0);
    expect(run.host.attempts).toHaveLength(2);
    expect(readFileSync(join(out, "execution_report.json"), "utf8")).toContain(`"run_id": "${third.run_id}"`);
    expect(reportText()).toBe(before);
  });

  it("never lets a dry run overwrite a real run's report, and still hands the dry run's report to the caller", async () => {
    run = new MiddleRun([{ id: "A" }]);
    run.host.onLaunch = (attempt) => attempt.exit(0);
    expect(run.report(await runAssignments({ assignmentsFile: run.file, ...run.options() })).exit_code).toBe(
      0,
    );
    const before = reportText();
    const dry = await runAssignments({
      assignmentsFile: run.file,
      ...run.options(),
      overrides: { dryRun: true },
    });
    if ("detached" in dry) throw new Error("a dry run never detaches");
    expect(dry.exitCode).toBe(0);
    expect(dry.reportPath).toBeNull();
    expect(dry.notWritten).toMatch(/not written/);
    expect(dry.report.dry_run).toBe(true);
    expect(reportText()).toBe(before);
    expect(run.host.attempts).toHaveLength(1);
  });
});
