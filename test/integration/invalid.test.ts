import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Report } from "../../src/contract/report.js";
import {
  killServer,
  listFiles,
  makeWorkspace,
  STEP,
  termorch,
  tmuxSessions,
  uniqueSocket,
  workspaceSnapshot,
  writeAssignments,
} from "./harness.js";

const socket = uniqueSocket("invalid");
const cleanups: Array<() => void> = [];
afterAll(() => {
  killServer(socket);
  for (const c of cleanups) c();
});

interface Case {
  name: string;
  /** Mutates the workspace or writes the assignments file; returns the assignments path. */
  setup: (dir: string, repo: string) => string;
  expect: RegExp[];
}

const base = (
  dir: string,
  tasks: Array<Record<string, unknown>> = [{ id: "A" }],
  extra: Record<string, unknown> = {},
) => writeAssignments(dir, tasks as never, extra);

const edit = (file: string, change: (a: { tasks: Array<Record<string, unknown>> }) => void): string => {
  const a = JSON.parse(readFileSync(file, "utf8"));
  change(a);
  writeFileSync(file, JSON.stringify(a));
  return file;
};

// What a run refuses from the assignments alone is tested in the middle tier
// (test/middle/invalid-input.test.ts, in-process): here, the CLI's side of it (exit 2, the message
// on stderr without a stack trace) and the refusals that need the workspace's repository.
const cases: Case[] = [
  { name: "missing file", setup: (dir) => join(dir, "nope.json"), expect: [/nope\.json/, /not found/] },
  {
    name: "unknown key",
    setup: (dir) => edit(base(dir), (a) => (a.tasks[0]!.dependecies = [])),
    expect: [/field tasks\[0\]/, /task A/, /unknown key "dependecies"/],
  },
  {
    name: "a tracked path in worktree_include",
    setup: (dir) =>
      base(dir, [{ id: "A" }], { environment: { workspace_dir: "repo", worktree_include: ["README.md"] } }),
    expect: [/worktree_include\[0\]/, /"README\.md" is tracked by git/],
  },
  {
    name: "the workspace itself in worktree_include",
    setup: (dir) =>
      base(dir, [{ id: "A" }], { environment: { workspace_dir: "repo", worktree_include: ["."] } }),
    expect: [/worktree_include\[0\]/, /not the workspace itself/],
  },
  {
    name: "dirty tracked file",
    setup: (dir, repo) => {
      writeFileSync(join(repo, "README.md"), "changed\n");
      return base(dir);
    },
    expect: [/uncommitted changes to tracked files: README\.md/, /--allow-dirty/],
  },
];

describe("invalid input: exit 2, a clear message, nothing started", () => {
  for (const c of cases) {
    it(c.name, async () => {
      const ws = makeWorkspace();
      cleanups.push(ws.cleanup);
      const file = c.setup(ws.dir, ws.repo);
      const before = workspaceSnapshot(ws.repo);
      const result = await termorch(["run", file], { socket });
      expect(result.exitCode).toBe(2);
      for (const re of c.expect) expect(result.stderr).toMatch(re);
      expect(result.stderr).not.toMatch(/\n\s+at /);
      expect(workspaceSnapshot(ws.repo)).toBe(before);
      expect(tmuxSessions(socket)).toEqual([]);
      for (const d of ["logs", "status", "artifacts", ".termorch"])
        expect(existsSync(join(ws.dir, d))).toBe(false);
      const report = Report.parse(JSON.parse(readFileSync(join(ws.dir, "execution_report.json"), "utf8")));
      expect(report.summary.completed).toBe(false);
      expect(report.error?.kind).toBe("invalid_input");
      expect(report.exit_code).toBe(2);
    });
  }

  it("validate reports the same problems without writing anything", async () => {
    const ws = makeWorkspace();
    cleanups.push(ws.cleanup);
    const file = base(ws.dir, [
      { id: "A", dependencies: ["B"] },
      { id: "B", dependencies: ["A"] },
    ]);
    const result = await termorch(["validate", file], { socket });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/dependency cycle: A -> B -> A/);
    expect(listFiles(ws.dir).filter((f) => !f.startsWith("repo/") && f !== "repo/")).toEqual([
      "assignments.json",
    ]);
  });

  it("rejects a config file with an unknown key, and a missing --config", async () => {
    const ws = makeWorkspace();
    cleanups.push(ws.cleanup);
    const file = base(ws.dir);
    const config = join(ws.dir, "config.json");
    writeFileSync(config, JSON.stringify({ agents: { a: { command: ["x"], ttty: true } } }));
    const bad = await termorch(["run", file, "--config", config], { socket });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr).toMatch(/config\.json, field agents\.a: unknown key "ttty"/);
    writeFileSync(config, JSON.stringify({ redact: ["zz[^]zz"] }));
    const perl = await termorch(["run", file, "--config", config], { socket });
    expect(perl.exitCode).toBe(2);
    expect(perl.stderr).toMatch(
      /field redact\[0\]: invalid pattern for the pane supervisor \(Perl\): Unmatched \[/,
    );
    const missing = await termorch(["run", file, "--config", join(ws.dir, "nope.json")], { socket });
    expect(missing.exitCode).toBe(2);
    expect(missing.stderr).toMatch(/nope\.json: config file not found/);
    expect(tmuxSessions(socket)).toEqual([]);
  });

  it("rejects bad usage with exit 2", async () => {
    expect((await termorch(["run"], { socket })).exitCode).toBe(2);
    expect((await termorch(["bogus"], { socket })).exitCode).toBe(2);
    const result = await termorch(["run", "x.json", "--max-parallel", "0"], { socket });
    expect(result.exitCode).toBe(2);
    expect(result.stderr).toMatch(/positive integer/);
  });
});

describe("dry run and validate", () => {
  it("reports waves and exact argv, and starts nothing", async () => {
    const ws = makeWorkspace();
    cleanups.push(ws.cleanup);
    mkdirSync(join(ws.repo, "ctx", "sub"));
    const file = base(ws.dir, [
      { id: "A", command: ["bash", STEP, "{context_path}", "{task_id}", "{run_id}", "x;y", "$HOME"] },
      { id: "B", dependencies: ["A"] },
    ]);
    const before = workspaceSnapshot(ws.repo);
    const result = await termorch(["run", file, "--dry-run", "--json"], { socket });
    expect(result.exitCode).toBe(0);
    const report = Report.parse(JSON.parse(result.stdout));
    expect(report.dry_run).toBe(true);
    expect(report.waves).toEqual([["A"], ["B"]]);
    expect(report.tasks[0]!.argv).toEqual([
      "bash",
      STEP,
      join(ws.repo, "ctx", "task.md"),
      "A",
      report.run_id,
      "x;y",
      "$HOME",
    ]);
    expect(workspaceSnapshot(ws.repo)).toBe(before);
    expect(tmuxSessions(socket)).toEqual([]);
    expect(listFiles(ws.dir).filter((f) => !f.startsWith("repo/") && f !== "repo/")).toEqual([
      "assignments.json",
      "execution_report.json",
    ]);
  });

  it("validate prints the waves", async () => {
    const ws = makeWorkspace();
    cleanups.push(ws.cleanup);
    const file = base(ws.dir, [{ id: "A" }, { id: "B" }, { id: "C", dependencies: ["A", "B"] }]);
    const result = await termorch(["validate", file], { socket });
    expect(result.exitCode).toBe(0);
    expect(result.stdout).toContain("wave 1: A, B");
    expect(result.stdout).toContain("wave 2: C");
  });

  it("schema prints JSON Schema generated from the zod schemas", async () => {
    const result = await termorch(["schema", "report"], { socket });
    expect(result.exitCode).toBe(0);
    const schema = JSON.parse(result.stdout);
    expect(schema.properties.summary.required).toEqual(
      expect.arrayContaining(["completed", "failed_tasks", "validation", "conflicts"]),
    );
  });
});
