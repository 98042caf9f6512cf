// ALTO handoffs (success_criteria.handoff): the template pre-created at $TERMORCH_HANDOFF in the
// worktree and named in the prompt, its gate (sections, Files Touched against the task's changes),
// kept as artifacts/<id>/handoff.md, never committed, and passed on to dependents' prompts.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import {
  git,
  killServer,
  makeWorkspace,
  readReport,
  termorch,
  uniqueSocket,
  writeAssignments,
} from "./harness.js";

const socket = uniqueSocket("handoff");
const cleanups: (() => void)[] = [];
afterAll(() => {
  killServer(socket);
  for (const c of cleanups) c();
});

/** An agent that writes `file` and then its handoff (the given text; "" leaves the template). */
function agent(file: string, handoff: string): string[] {
  const fill = handoff ? `printf '%s' "$HANDOFF_TEXT" > "$TERMORCH_HANDOFF"` : "true";
  return ["bash", "-c", `test -f "$TERMORCH_HANDOFF" && echo ${file} > ${file} && ${fill}`];
}

const handoff = (summary: string, files: string[]): string =>
  `# Handoff\n## Summary\n${summary}\n## Files Touched\n${files.map((f) => `- ${f}`).join("\n")}\n## How to Verify\ncat ${files[0]}\n`;

describe("ALTO handoffs", () => {
  it("checks each handoff, keeps it, never commits it, and gives it to dependents", async () => {
    const ws = makeWorkspace();
    cleanups.push(ws.cleanup);
    const task = (id: string, deps: string[], text: string) => ({
      id,
      dependencies: deps,
      command: agent(`${id}.txt`, text),
      env: { HANDOFF_TEXT: text },
      success_criteria: { handoff: true },
    });
    const file = writeAssignments(ws.dir, [
      task("A", [], handoff("Made A.", ["A.txt"])),
      task("B", ["A"], handoff("Made B.", ["B.txt", "src/zzz.txt"])),
      task("C", ["A"], ""),
      task("D", ["A"], handoff("Made D.", ["D.txt"])),
      task("E", ["A"], "# Handoff\n## Summary\nMade E.\n## Files Touched\n## How to Verify\ncat E.txt\n"),
    ]);
    const r = await termorch(["run", file], { socket });
    expect(r.exitCode).toBe(1);
    const report = readReport(ws.dir);
    const by = new Map(report.tasks.map((t) => [t.id, t]));
    const gate = (id: string) => by.get(id)!.gates.find((g) => g.name === "handoff");
    expect(by.get("A")).toMatchObject({ status: "success" });
    expect(gate("A")).toMatchObject({
      passed: true,
      detail: "sections present, 1 files listed, all changed",
    });
    expect(by.get("B")).toMatchObject({ status: "failed", reason: "validation" });
    expect(gate("B")?.detail).toBe("its handoff lists files the task did not change: src/zzz.txt");
    expect(by.get("C")).toMatchObject({ status: "failed", reason: "validation" });
    expect(gate("C")?.detail).toBe("its handoff lacks Summary, Files Touched, How to Verify (filled in)");
    expect(by.get("D")).toMatchObject({ status: "success" });
    expect(by.get("E")).toMatchObject({ status: "failed" });
    expect(gate("E")?.detail).toContain("lacks Files Touched");
    // Kept with the artifacts; in the agent's prompt, where it is; in a dependent's, what it says.
    expect(readFileSync(join(ws.dir, "artifacts", "A", "handoff.md"), "utf8")).toBe(
      handoff("Made A.", ["A.txt"]),
    );
    const promptD = readFileSync(join(ws.dir, "artifacts", "D", "prompt.md"), "utf8");
    expect(promptD).toContain("## Your handoff");
    expect(promptD).toContain(".termorch/handoff.md");
    expect(promptD).toContain("Its handoff (artifacts/A/handoff.md):");
    expect(promptD).toContain("Made A.");
    // Never committed: A's branch holds its file only.
    const branch = by.get("A")!.branch!;
    expect(git(ws.repo, "show", "--name-only", "--format=", branch).trim()).toBe("A.txt");
  });
});
