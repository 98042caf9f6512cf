import { execFileSync, spawn } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { GateRecord } from "../../src/contract/gate-record.js";
import { ROOT, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("gate-status");

const REAL_PERL = execFileSync("sh", ["-c", "command -v perl"], { encoding: "utf8" }).trim();
const WATCHDOG = join(ROOT, "src", "shell", "gate-watchdog.pl");

describe("a tests_cmd whose exit status never reaches termorch", () => {
  it("fails its gate, whatever the watchdog's own exit code", async () => {
    const { dir } = workspace();
    // A perl first in PATH that runs the real one, but the gate watchdog with its report pipe
    // (fd 3) sent nowhere: the status line is lost, the watchdog itself exits 0.
    const bin = join(dir, "bin");
    mkdirSync(bin);
    writeFileSync(
      join(bin, "perl"),
      [
        "#!/bin/sh",
        `case "$1" in */gate-watchdog.pl) exec ${REAL_PERL} "$@" 3>/dev/null ;; esac`,
        `exec ${REAL_PERL} "$@"`,
      ].join("\n"),
    );
    chmodSync(join(bin, "perl"), 0o755);
    const file = writeAssignments(dir, [{ id: "t1", success_criteria: { tests_cmd: "exit 3" } }]);
    const result = await termorch(["run", file], {
      socket,
      env: { PATH: `${bin}:${process.env.PATH ?? "/usr/bin:/bin"}` },
    });
    const task = readReport(dir).tasks[0]!;
    const gate = task.gates.find((g) => g.name === "tests_cmd")!;
    expect(gate.passed).toBe(false);
    expect(gate.detail).toMatch(/^its exit status was lost \(the gate watchdog exited with code 0 without/);
    expect(task.status).toBe("failed");
    expect(result.exitCode).toBe(1);
  });
});

describe("the gate watchdog", () => {
  it("exits 70, reporting no status, when termorch is gone before the command ends", async () => {
    // stdin at EOF from the start: the watchdog takes termorch for dead and ends the command.
    const child = spawn(REAL_PERL, [WATCHDOG, "200", "0", "", "sh", "-c", "exec sleep 1000"], {
      stdio: ["ignore", "ignore", "ignore", "pipe"],
    });
    let reports = "";
    (child.stdio[3] as Readable).on("data", (chunk: Buffer) => {
      reports += chunk.toString("utf8");
    });
    const code = await new Promise<number | null>((done) => child.once("close", (c) => done(c)));
    expect(reports).toMatch(/^pid \d+\n$/);
    expect(code).toBe(70);
  });

  it("records the gate's group before its command starts: a termorch killed at any moment leaves no gate a resume cannot end", async () => {
    const { dir } = workspace();
    const record = join(dir, "gate.json");
    const seen = join(dir, "seen");
    const child = spawn(
      REAL_PERL,
      [WATCHDOG, "200", "0", record, "sh", "-c", `cat ${record} > ${seen}; echo $$ >> ${seen}`],
      {
        stdio: ["pipe", "ignore", "ignore", "pipe"],
      },
    );
    let reports = "";
    (child.stdio[3] as Readable).on("data", (chunk: Buffer) => {
      reports += chunk.toString("utf8");
    });
    const code = await new Promise<number | null>((done) => child.once("close", (c) => done(c)));
    expect(code).toBe(0);
    expect(reports).toMatch(/^pid \d+\nstatus 0\n$/);
    const [written, pid] = readFileSync(seen, "utf8").trim().split("\n");
    const parsed = GateRecord.parse(JSON.parse(written!));
    expect(parsed.pgid).toBe(Number(pid));
    // When its leader started, in ms since the epoch (btime has a one-second resolution).
    expect(parsed.start).toBeGreaterThan(Date.now() - 60_000);
    expect(parsed.start).toBeLessThan(Date.now() + 2000);
  });
});
