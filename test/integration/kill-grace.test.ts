import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, termorch, testFile, waitFor, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("kill-grace");

describe("the in-pane supervisor's grace period", () => {
  it("is the config's kill_grace_s: a leftover that ignores TERM gets that long before KILL", async () => {
    const { dir } = workspace();
    const mark = (name: string): string => join(dir, name);
    // The agent exits at once; its child keeps the output pipe, ignores TERM and, once it got
    // it, counts eight half-second turns of its own before it says it survived them: 4 s,
    // longer than the 2 s the supervisor used to allow whatever kill_grace_s said.
    const child = [
      `trap 'touch ${mark("term")}' TERM`,
      "n=0",
      `while [ ! -e ${mark("release")} ]; do`,
      "  sleep 0.5",
      `  if [ -e ${mark("term")} ]; then n=$((n + 1)); [ $n -eq 8 ] && touch ${mark("survived")}; fi`,
      "done",
    ].join("\n");
    const file = writeAssignments(dir, [
      { id: "A", command: ["bash", "-c", `bash -c '${child.replaceAll("'", "'\\''")}' & exit 0`] },
    ]);
    const config = join(dir, "config.json");
    writeFileSync(config, JSON.stringify({ defaults: { kill_grace_s: 60 } }));
    const run = termorch(["run", file, "--config", config], { socket });
    await waitFor(() => existsSync(mark("term")), 30_000, "the leftover to get TERM");
    await waitFor(() => existsSync(mark("survived")), 30_000, "the leftover to outlive 4 s after TERM");
    writeFileSync(mark("release"), "");
    const result = await run;
    expect(result.exitCode, result.stderr).toBe(0);
    expect(readReport(dir).tasks[0]?.status).toBe("success");
  });
});
