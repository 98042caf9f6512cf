import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("git-config-cmds");

describe("commands an agent plants in the repository's git config", () => {
  it("termorch's git runs neither the fsmonitor (directly or through include.path) nor hooks", async () => {
    const { dir } = workspace();
    const marker = join(dir, "ran");
    const command = join(dir, "planted.sh");
    writeFileSync(command, `#!/bin/sh\necho "$0 $PWD" >> ${marker}\nexit 0\n`, { mode: 0o755 });
    const included = join(dir, "included.gitconfig");
    writeFileSync(included, `[core]\n\tfsmonitor = ${command}\n`);
    const plant = [
      "common=$(git rev-parse --path-format=absolute --git-common-dir)",
      `git config --file "$common/config" core.fsmonitor ${command}`,
      `git config --file "$common/config" include.path ${included}`,
      'mkdir -p "$common/hooks"',
      `for h in pre-commit post-commit post-checkout reference-transaction; do cp ${command} "$common/hooks/$h"; done`,
      "echo changed > README.md",
    ].join("; ");
    // B starts after A planted them (its worktree is made then), and the merge comes after both.
    const file = writeAssignments(dir, [
      { id: "A", command: ["bash", "-c", plant] },
      { id: "B", dependencies: ["A"], env: { WRITE: "b.txt=b" } },
    ]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    expect(readReport(dir).merge.result).toBe("success");
    expect(existsSync(marker)).toBe(false);
  });
});
