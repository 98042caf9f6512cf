import { lstatSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import { beforeAll, expect, it } from "vitest";
import type { Report } from "../../src/contract/report.js";
import { describeWith } from "../needs.js";
import { ROOT, termorch, testFile, writeAssignments } from "./harness.js";

// Issue 35, item 1: a sandboxed agent plants links where termorch works after it (its artifacts
// folder, its handoff, its worktree), as the user and outside the sandbox. Each task below is one
// trap of test/fixtures/agents/plant-links.sh; what the link names must come out untouched, and
// what termorch keeps must be its own regular files. Every case failed before src/fs/no-follow.ts.
const { socket, workspace } = testFile("agent-links");
const PLANT = join(ROOT, "test", "fixtures", "agents", "plant-links.sh");
const UNTOUCHED = "untouched by termorch\n";
// Matched by the redaction rules: redacting through a link would rewrite the key's lines.
const KEY =
  "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\n";
const AWS = "[default]\naws_secret_access_key = termorchTestHiddenCredential0042\n";

let ws: ReturnType<typeof workspace>;
let home: string;
let runDir: string;
let report: Report;
let exitCode: number;
let stderr: string;

const describeSandbox = describeWith("bwrap", "test/integration/agent-links.test.ts");

describeSandbox("links a sandboxed agent planted for termorch to follow after it", () => {
  beforeAll(async () => {
    ws = workspace();
    home = join(ws.dir, "home");
    for (const d of [".ssh", ".aws", "dir"]) mkdirSync(join(home, d), { recursive: true });
    writeFileSync(join(home, ".ssh", "id_ed25519"), KEY);
    writeFileSync(join(home, ".aws", "credentials"), AWS);
    for (const v of ["patch", "handoff", "prompt"]) writeFileSync(join(home, `x-${v}.txt`), UNTOUCHED);
    const task = (id: string, victim: string, extra: Record<string, unknown> = {}) => ({
      id,
      command: ["bash", PLANT],
      env: { PLANT: id, VICTIM: join(home, victim) },
      sandbox: { network: "none" },
      ...extra,
    });
    const file = writeAssignments(
      ws.dir,
      [
        task("patch", "x-patch.txt"),
        task("handoff-copy", "x-handoff.txt", { success_criteria: { handoff: true } }),
        task("any-link", ".ssh/id_ed25519"),
        task("files-dir", "dir", { success_criteria: { required_artifacts: ["out.txt"] } }),
        task("status", "unused"),
        task("retry-prompt", "x-prompt.txt", { retries: 1 }),
        task("via-folder", ".aws", { success_criteria: { required_artifacts: ["out/credentials"] } }),
        task("leaf-link", ".aws/credentials", { success_criteria: { required_artifacts: ["out.txt"] } }),
        task("handoff-moved", ".aws/credentials", { success_criteria: { handoff: true } }),
      ],
      { environment: { resource_limits: { max_parallel: 3 } } },
    );
    runDir = join(ws.dir, "run");
    const r = await termorch(["run", file, "--out", runDir], { socket, env: { HOME: home } });
    ({ exitCode, stderr } = r);
    report = JSON.parse(readFileSync(join(runDir, "execution_report.json"), "utf8")) as Report;
  });

  const taskOf = (id: string) => report.tasks.find((t) => t.id === id)!;
  const art = (id: string, ...rel: string[]) => join(runDir, "artifacts", id, ...rel);
  const isRegular = (path: string) => lstatSync(path, { throwIfNoEntry: false })?.isFile() ?? false;

  it("runs to its end: the traps that hid files fail their gates, the others succeed", () => {
    expect(exitCode, stderr).toBe(1);
    const states = Object.fromEntries(report.tasks.map((t) => [t.id, t.status]));
    const why = report.tasks.map((t) => `${t.id}: ${t.reason} ${t.detail ?? ""}`).join("\n");
    expect(states, why).toEqual({
      patch: "success",
      "handoff-copy": "success",
      "any-link": "success",
      "files-dir": "success",
      status: "success",
      "retry-prompt": "success",
      "via-folder": "failed",
      "leaf-link": "failed",
      "handoff-moved": "failed",
    });
  });

  it("changes.patch: written fresh, not into the file its link named", () => {
    expect(readFileSync(join(home, "x-patch.txt"), "utf8")).toBe(UNTOUCHED);
    expect(isRegular(art("patch", "changes.patch"))).toBe(true);
    expect(readFileSync(art("patch", "changes.patch"), "utf8")).toContain("+work of patch");
  });

  it("the kept handoff: written fresh, not through the agent's link", () => {
    expect(readFileSync(join(home, "x-handoff.txt"), "utf8")).toBe(UNTOUCHED);
    expect(readFileSync(art("handoff-copy", "handoff.md"), "utf8")).toContain("handoff text of handoff-copy");
    expect(isRegular(art("handoff-copy", "handoff.md"))).toBe(true);
  });

  it("any link in the artifacts: dropped with a note, never redacted through (the key survives)", () => {
    expect(readFileSync(join(home, ".ssh", "id_ed25519"), "utf8")).toBe(KEY);
    expect(lstatSync(art("any-link", "key"), { throwIfNoEntry: false })).toBeUndefined();
    const note = readFileSync(art("any-link", "termorch-dropped.txt"), "utf8");
    expect(note).toMatch(/^key: a symbolic link to .*id_ed25519, not kept/m);
    expect(taskOf("any-link").artifacts).not.toContain("artifacts/any-link/key");
    expect(taskOf("any-link").artifacts).toContain("artifacts/any-link/termorch-dropped.txt");
  });

  it("the required artifacts' copy: into a folder of termorch's own, nothing created where the link pointed", () => {
    expect(readdirSync(join(home, "dir"))).toEqual([]);
    expect(isRegular(art("files-dir", "files", "out.txt"))).toBe(true);
    expect(readFileSync(art("files-dir", "files", "out.txt"), "utf8")).toBe("out\n");
  });

  it("a link into the run's status/: no forged file appears there", () => {
    expect(readdirSync(join(runDir, "status"))).not.toContain("forged.json");
    expect(isRegular(art("status", "changes.patch"))).toBe(true);
  });

  it("the retry's prompt: written fresh, not into the file the first attempt's link named", () => {
    expect(taskOf("retry-prompt").attempts).toBe(2);
    expect(readFileSync(join(home, "x-prompt.txt"), "utf8")).toBe(UNTOUCHED);
    expect(isRegular(art("retry-prompt", "prompt.md"))).toBe(true);
  });

  it("a required artifact through a linked folder, or a link itself: not satisfied, not copied, named", () => {
    for (const id of ["via-folder", "leaf-link"]) {
      const gate = taskOf(id).gates.find((g) => g.name === "required_artifacts")!;
      expect(gate.passed, id).toBe(false);
      expect(gate.detail, id).toMatch(/not taken: .*(symbolic link|outside)/);
    }
    expect(lstatSync(art("via-folder", "files"), { throwIfNoEntry: false })).toBeUndefined();
    expect(lstatSync(art("leaf-link", "files"), { throwIfNoEntry: false })).toBeUndefined();
  });

  it("a handoff replaced by a link to a hidden file: not read, the gate says why", () => {
    const gate = taskOf("handoff-moved").gates.find((g) => g.name === "handoff")!;
    expect(gate.passed).toBe(false);
    expect(gate.detail).toMatch(/not read: .*symbolic link/);
  });

  it("no hidden secret is anywhere in the run folder, and no link either", () => {
    const found: string[] = [];
    const links: string[] = [];
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, e.name);
        if (e.isSymbolicLink()) links.push(relative(runDir, path));
        else if (e.isDirectory()) walk(path);
        else if (e.isFile() && readFileSync(path, "utf8").includes("termorchTestHiddenCredential0042"))
          found.push(relative(runDir, path));
      }
    };
    walk(runDir);
    expect(found).toEqual([]);
    expect(links.filter((l) => l.startsWith("artifacts/"))).toEqual([]);
    expect(readFileSync(join(home, ".aws", "credentials"), "utf8")).toBe(AWS);
  });
});
