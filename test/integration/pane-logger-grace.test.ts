// The supervisor's waits are bounded by the run's kill_grace_s, not by a time of its own: here
// its wait for a tty task's pane logger that never reports (it used to be 5 s, whatever the grace).
import { execFileSync } from "node:child_process";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("pane-logger-grace");
const REAL_PERL = execFileSync("sh", ["-c", "command -v perl"], { encoding: "utf8" }).trim();

describe("a tty task whose pane logger never reports", () => {
  it("is recorded once kill_grace_s has passed, with a note in its stderr log", async () => {
    const { dir } = workspace();
    // A perl first in PATH that runs the real one, except for the pane logger: that one only
    // swallows the pane's output, and never writes filter.done.
    const bin = join(dir, "bin");
    mkdirSync(bin);
    writeFileSync(
      join(bin, "perl"),
      [
        "#!/bin/sh",
        'case "$1" in */pane-logger.pl) exec cat >/dev/null ;; esac',
        `exec ${REAL_PERL} "$@"`,
      ].join("\n"),
    );
    chmodSync(join(bin, "perl"), 0o755);
    const config = join(dir, "config.json");
    writeFileSync(
      config,
      JSON.stringify({
        defaults: { kill_grace_s: 1 },
        agents: { term: { command: ["bash", "-c", "echo hello"], tty: true } },
      }),
    );
    const file = writeAssignments(dir, [{ id: "t1" }]);
    const a = JSON.parse(readFileSync(file, "utf8"));
    delete a.tasks[0].command;
    a.tasks[0].agent = "term";
    writeFileSync(file, JSON.stringify(a));

    const result = await termorch(["run", file, "--config", config], {
      socket,
      env: { PATH: `${bin}:${process.env.PATH ?? "/usr/bin:/bin"}` },
    });
    expect(result.exitCode, result.stderr).toBe(0);
    const task = readReport(dir).tasks[0]!;
    expect(readFileSync(join(dir, task.logs.stderr!), "utf8")).toContain(
      "termorch: the pane output logger did not finish; the stdout log may be incomplete",
    );
    // The 1 s grace and the task's own start, well under the 5 s the supervisor used to wait.
    expect(task.duration_ms!).toBeLessThan(4000);
  });
});
