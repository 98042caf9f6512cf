import { afterEach, describe, expect, it } from "vitest";
import {
  checkMerge,
  createIntegrationCommit,
  type MergeItem,
  mergeOntoMovedTarget,
} from "../../src/git/merge.js";
import { branchWith, makeRepo, type RepoSnapshot, type TestRepo } from "../fixtures/git-repo.js";

let repos: TestRepo[] = [];
afterEach(async () => {
  await Promise.all(repos.map((r) => r.cleanup()));
  repos = [];
});

interface Setup {
  r: TestRepo;
  base: string;
  before: RepoSnapshot;
}

/** A repository with some local state a merge check must not disturb: staged, unstaged, untracked. */
async function setup(files: Record<string, string>): Promise<Setup> {
  const r = await makeRepo({ ...files, "user-notes.txt": "notes\n", "staged.txt": "s\n" });
  repos.push(r);
  const base = await r.git("rev-parse", "HEAD");
  return { r, base, before: await r.snapshot() };
}

/** Creates the task branches, then snapshots the repository as the merge check will find it. */
async function tasks(
  s: Setup,
  defs: { task: string; from?: string; files: Record<string, string | null> }[],
): Promise<MergeItem[]> {
  const items: MergeItem[] = [];
  for (const d of defs) {
    const start = d.from ? (items.find((i) => i.task === d.from)?.commit as string) : s.base;
    const commit = await branchWith(s.r, `termorch/run1/${d.task}`, start, d.files);
    items.push({ task: d.task, commit, start });
  }
  // Local work of the user, present while the check runs.
  await s.r.write("user-notes.txt", "notes, edited\n");
  await s.r.write("staged.txt", "s, staged\n");
  await s.r.git("add", "staged.txt");
  await s.r.write("untracked.txt", "mine\n");
  s.before = await s.r.snapshot();
  return items;
}

async function expectUnchanged(s: Setup): Promise<void> {
  expect(await s.r.snapshot()).toEqual(s.before);
}

describe("checkMerge", () => {
  it("merges independent task branches cleanly, in memory", async () => {
    const s = await setup({ "app.txt": "app\n" });
    const items = await tasks(s, [
      { task: "A", files: { "a.txt": "A\n" } },
      { task: "B", files: { "b.txt": "B\n" } },
      { task: "C", files: { "c.txt": "C\n", "app.txt": null } },
    ]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.conflicts).toEqual([]);
    expect(res.merged).toEqual(["A", "B", "C"]);
    expect(res.parents).toEqual([s.base, ...items.map((i) => i.commit)]);
    expect(res.tree).not.toBeNull();
    const listing = await s.r.git("ls-tree", "--name-only", res.tree as string);
    expect(listing.split("\n")).toEqual(["a.txt", "b.txt", "c.txt", "staged.txt", "user-notes.txt"]);
    await expectUnchanged(s);

    const commit = await createIntegrationCommit(s.r.root, {
      tree: res.tree as string,
      parents: res.parents,
      message: "termorch: integrate run1",
      branch: "termorch/run1/integration",
    });
    expect(await s.r.git("rev-parse", "termorch/run1/integration")).toBe(commit);
    expect((await s.r.git("rev-list", "--parents", "-n1", commit)).split(" ")).toEqual([
      commit,
      ...res.parents,
    ]);
    expect(await s.r.git("log", "-1", "--format=%an|%s", commit)).toBe("termorch|termorch: integrate run1");
    // Only the new branch appeared; the user's checkout is as it was.
    const after = await s.r.snapshot();
    expect({ ...after, refs: "" }).toEqual({ ...s.before, refs: "" });
  });

  it("merges a chain of dependent tasks as a fast-forward to the last one", async () => {
    const s = await setup({ "app.txt": "1\n" });
    const items = await tasks(s, [
      { task: "A", files: { "app.txt": "2\n" } },
      { task: "B", from: "A", files: { "app.txt": "3\n" } },
      { task: "C", from: "B", files: { "c.txt": "C\n" } },
    ]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.conflicts).toEqual([]);
    const tipC = items[2]?.commit as string;
    expect(res.parents).toEqual([tipC]);
    expect(res.tree).toBe(await s.r.git("rev-parse", `${tipC}^{tree}`));
    await expectUnchanged(s);
    const commit = await createIntegrationCommit(s.r.root, {
      tree: res.tree as string,
      parents: res.parents,
      message: "m",
      branch: "termorch/run1/integration",
    });
    expect(commit).toBe(tipC);
  });

  it("reports a content conflict with its file and both tasks, and changes nothing", async () => {
    const s = await setup({ "app.txt": "1\n2\n3\n" });
    const items = await tasks(s, [
      { task: "A", files: { "app.txt": "1\nA\n3\n" } },
      { task: "B", files: { "app.txt": "1\nB\n3\n" } },
    ]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.tree).toBeNull();
    expect(res.conflicts).toEqual([
      { tasks: ["A", "B"], files: ["app.txt"], detail: "B conflicts with A: content in app.txt" },
    ]);
    await expectUnchanged(s);
  });

  it("reports an add/add conflict", async () => {
    const s = await setup({});
    const items = await tasks(s, [
      { task: "A", files: { "new.txt": "from A\n" } },
      { task: "B", files: { "new.txt": "from B\n" } },
    ]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.conflicts).toEqual([
      { tasks: ["A", "B"], files: ["new.txt"], detail: "B conflicts with A: add/add in new.txt" },
    ]);
    await expectUnchanged(s);
  });

  it("reports a binary add/add conflict once (git tells it twice: it cannot merge binary files, and add/add)", async () => {
    const s = await setup({});
    const items = await tasks(s, [
      { task: "A", files: { "bin.dat": "A\0A" } },
      { task: "B", files: { "bin.dat": "B\0B" } },
    ]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.conflicts).toEqual([
      { tasks: ["A", "B"], files: ["bin.dat"], detail: "B conflicts with A: add/add (binary) in bin.dat" },
    ]);
    await expectUnchanged(s);
  });

  it("reports a modify/delete conflict", async () => {
    const s = await setup({ "old.txt": "old\n" });
    const items = await tasks(s, [
      { task: "A", files: { "old.txt": null } },
      { task: "B", files: { "old.txt": "modified\n" } },
    ]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.conflicts).toEqual([
      { tasks: ["A", "B"], files: ["old.txt"], detail: "B conflicts with A: modify/delete in old.txt" },
    ]);
    await expectUnchanged(s);
  });

  it("reports a rename/delete conflict with both paths", async () => {
    const long = "a line long enough for git to see the rename\n".repeat(4);
    const s = await setup({ "r.txt": long });
    const items = await tasks(s, [
      { task: "A", files: { "r.txt": null, "r2.txt": long } },
      { task: "B", files: { "r.txt": null } },
    ]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.conflicts).toHaveLength(1);
    expect(res.conflicts[0]?.tasks).toEqual(["A", "B"]);
    expect(res.conflicts[0]?.files).toEqual(["r.txt", "r2.txt"]);
    expect(res.conflicts[0]?.detail).toMatch(/rename\/delete/);
    await expectUnchanged(s);
  });

  // merge-redo.test runs these shapes with on_conflict "redo"; what halt would report is decided here.
  it("merges an edit of a renamed file into its new name, and reports a rename that changed the same line as a content conflict", async () => {
    const config = Array.from({ length: 8 }, (_, i) => `key${i + 1}\n`).join("");
    const edited = (n: number, text: string) => config.replace(`key${n}\n`, `${text}\n`);
    const s = await setup({ "config.txt": config });
    const pure = await tasks(s, [
      { task: "A", files: { "config.txt": null, "settings.txt": config } },
      { task: "B", files: { "config.txt": edited(5, "B5") } },
    ]);
    const merged = await checkMerge(s.r.root, s.base, pure);
    expect(merged.conflicts).toEqual([]);
    expect(merged.merged).toEqual(["A", "B"]);
    expect(await s.r.git("show", `${merged.tree}:settings.txt`)).toContain("B5\n");
    // The same repository: other tasks, from the same base.
    const same = await tasks(s, [
      { task: "C", files: { "config.txt": null, "settings.txt": edited(1, "C1") } },
      { task: "D", files: { "config.txt": edited(1, "D1") } },
    ]);
    const res = await checkMerge(s.r.root, s.base, same);
    // D changed only config.txt: it is named though git reports the conflict in the new name.
    expect(res.conflicts).toEqual([
      { tasks: ["C", "D"], files: ["settings.txt"], detail: "D conflicts with C: content in settings.txt" },
    ]);
    await expectUnchanged(s);
  });

  it("names a dependent that changed the same line again with the chain it carries", async () => {
    // c1 -> c2 -> c3; b0 merges before c1 and conflicts with it; c2 changed c1's line, c3 only added a file.
    const chain = Array.from({ length: 6 }, (_, i) => `line${i + 1}\n`).join("");
    const at2 = (text: string) => chain.replace("line2\n", `${text}\n`);
    const s = await setup({ "chain.txt": chain });
    const items = await tasks(s, [
      { task: "b0", files: { "chain.txt": at2("b0") } },
      { task: "c1", files: { "chain.txt": at2("c1") } },
      { task: "c2", from: "c1", files: { "chain.txt": at2("c1 c2") } },
      { task: "c3", from: "c2", files: { "c3.txt": "c3\n" } },
    ]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.conflicts.map((c) => c.tasks)).toEqual([
      ["b0", "c1"],
      ["b0", "c1", "c2"],
    ]);
    expect(res.merged).toEqual(["b0"]);
    await expectUnchanged(s);
  });

  it("goes on past a conflict and reports every one, with the right task pairs", async () => {
    const s = await setup({ "f.txt": "f\n", "g.txt": "g\n" });
    const items = await tasks(s, [
      { task: "A", files: { "f.txt": "A\n", "g.txt": "A\n" } },
      { task: "B", files: { "f.txt": "B\n" } },
      { task: "C", files: { "c.txt": "C\n" } },
      { task: "D", files: { "g.txt": "D\n", "d.txt": "D\n" } },
      { task: "E", files: { "d.txt": "E\n" } },
    ]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.tree).toBeNull();
    expect(res.merged).toEqual(["A", "C", "E"]);
    expect(res.conflicts).toEqual([
      { tasks: ["A", "B"], files: ["f.txt"], detail: "B conflicts with A: content in f.txt" },
      { tasks: ["A", "D"], files: ["g.txt"], detail: "D conflicts with A: content in g.txt" },
      // E merged only because D was left out; D collides with it too, and is reported now rather
      // than after D's conflict with A is fixed.
      { tasks: ["E", "D"], files: ["d.txt"], detail: "D conflicts with E: add/add in d.txt" },
    ]);
    await expectUnchanged(s);
  });

  it("reports two left-out tasks that collide with each other, and a dependent of one as that one", async () => {
    const s = await setup({ "f.txt": "f\n", "h.txt": "h\n" });
    const items = await tasks(s, [
      { task: "A", files: { "f.txt": "A\n" } },
      { task: "B", files: { "f.txt": "B\n", "h.txt": "B\n" } },
      { task: "C", files: { "f.txt": "C\n", "h.txt": "C\n" } },
      { task: "D", from: "B", files: { "d.txt": "D\n" } },
    ]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.merged).toEqual(["A"]);
    expect(res.conflicts).toEqual([
      { tasks: ["A", "B"], files: ["f.txt"], detail: "B conflicts with A: content in f.txt" },
      { tasks: ["A", "C"], files: ["f.txt"], detail: "C conflicts with A: content in f.txt" },
      {
        tasks: ["B", "C"],
        files: ["f.txt", "h.txt"],
        detail: "C conflicts with B: content in f.txt; content in h.txt",
      },
    ]);
    await expectUnchanged(s);
  });

  it("names the task that made a change, not its dependents", async () => {
    const s = await setup({ "f.txt": "f\n" });
    const items = await tasks(s, [
      { task: "A", files: { "f.txt": "A\n" } },
      { task: "B", from: "A", files: { "b.txt": "B\n" } },
      { task: "X", files: { "f.txt": "X\n" } },
      // Y depends on X, which conflicted: its merge would repeat X's conflict, not add its own.
      { task: "Y", from: "X", files: { "y.txt": "Y\n" } },
    ]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.conflicts).toEqual([
      { tasks: ["A", "X"], files: ["f.txt"], detail: "X conflicts with A: content in f.txt" },
    ]);
    expect(res.merged).toEqual(["A", "B"]);
    await expectUnchanged(s);
  });

  it("with nothing to merge, the base is the result", async () => {
    const s = await setup({ "a.txt": "a\n" });
    const items = await tasks(s, [{ task: "A", files: {} }]);
    const res = await checkMerge(s.r.root, s.base, items);
    expect(res.conflicts).toEqual([]);
    expect(res.parents).toEqual([items[0]?.commit]);
    const empty = await checkMerge(s.r.root, s.base, []);
    expect(empty.parents).toEqual([s.base]);
    expect(empty.tree).toBe(await s.r.git("rev-parse", `${s.base}^{tree}`));
  });
});

describe("mergeOntoMovedTarget", () => {
  it("merges the integration onto a target that moved with unrelated changes", async () => {
    const s = await setup({ "a.txt": "a\n" });
    const items = await tasks(s, [
      { task: "A", files: { "a.txt": "A\n" } },
      { task: "B", files: { "b.txt": "B\n" } },
    ]);
    const check = await checkMerge(s.r.root, s.base, items);
    const integration = await createIntegrationCommit(s.r.root, {
      tree: check.tree as string,
      parents: check.parents,
      message: "integrate",
      branch: "termorch/run1/integration",
    });
    const moved = await branchWith(s.r, "moved", s.base, { "user.txt": "the user's commit\n" });
    const res = await mergeOntoMovedTarget(s.r.root, {
      target: moved,
      integration,
      base: s.base,
      items,
      message: "termorch: integrate run1 onto moved main",
      branch: "termorch/run1/integration",
    });
    expect(res.ok).toBe(true);
    if (!res.ok) return;
    expect((await s.r.git("rev-list", "--parents", "-n1", res.commit)).split(" ")).toEqual([
      res.commit,
      moved,
      integration,
    ]);
    expect(await s.r.git("rev-parse", "termorch/run1/integration")).toBe(res.commit);
    const listing = (await s.r.git("ls-tree", "--name-only", res.commit)).split("\n");
    expect(listing).toEqual(expect.arrayContaining(["a.txt", "b.txt", "user.txt"]));
  });

  it("reports a conflict with the target's new commits and changes nothing", async () => {
    const s = await setup({ "a.txt": "a\n" });
    const items = await tasks(s, [
      { task: "A", files: { "a.txt": "A\n" } },
      { task: "B", files: { "b.txt": "B\n" } },
    ]);
    const check = await checkMerge(s.r.root, s.base, items);
    const integration = await createIntegrationCommit(s.r.root, {
      tree: check.tree as string,
      parents: check.parents,
      message: "integrate",
      branch: "termorch/run1/integration",
    });
    const moved = await branchWith(s.r, "moved", s.base, { "a.txt": "the user's a\n" });
    const before = await s.r.snapshot();
    const res = await mergeOntoMovedTarget(s.r.root, {
      target: moved,
      integration,
      base: s.base,
      items,
      message: "m",
      branch: "termorch/run1/integration",
    });
    expect(res).toEqual({
      ok: false,
      conflicts: [
        {
          tasks: ["A"],
          files: ["a.txt"],
          detail: "the target branch changed during the run and conflicts with A: content in a.txt",
        },
      ],
    });
    expect(await s.r.snapshot()).toEqual(before);
  });
});
