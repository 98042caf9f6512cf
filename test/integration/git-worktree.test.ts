import { lstat, mkdir, readFile, readlink, rm, stat, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { InputError } from "../../src/errors.js";
import { commitTaskChanges } from "../../src/git/commit.js";
import { GitError } from "../../src/git/errors.js";
import {
  deleteBranch,
  deleteMergedBranches,
  listWorktrees,
  prepareDetachedWorktree,
  prepareTaskWorktree,
  removeWorktree,
  removeWorktrees,
} from "../../src/git/worktree.js";
import { branchWith, g, makeRepo, type TestRepo } from "../fixtures/git-repo.js";

let repos: TestRepo[] = [];
afterEach(async () => {
  await Promise.all(repos.map((r) => r.cleanup()));
  repos = [];
});
async function repo(files?: Record<string, string>): Promise<TestRepo> {
  const r = await makeRepo(files);
  repos.push(r);
  return r;
}

async function exists(p: string): Promise<boolean> {
  return (await lstat(p).catch(() => null)) !== null;
}

describe("prepareTaskWorktree", () => {
  it("starts a task without dependencies at the base commit, on its own branch", async () => {
    const r = await repo({ "a.txt": "a\n" });
    const base = await r.git("rev-parse", "HEAD");
    const before = await r.snapshot();
    const wt = r.wtPath("A");
    const res = await prepareTaskWorktree({
      repo: r.root,
      path: wt,
      branch: "termorch/run1/A",
      base,
      deps: [],
      include: [],
    });
    expect(res).toEqual({ ok: true, startCommit: base, reused: false });
    expect(await g(wt, "symbolic-ref", "HEAD")).toBe("refs/heads/termorch/run1/A");
    expect(await g(wt, "rev-parse", "HEAD")).toBe(base);
    expect(await readFile(path.join(wt, "a.txt"), "utf8")).toBe("a\n");
    expect(await g(wt, "status", "--porcelain")).toBe("");
    // The user's checkout is untouched: same HEAD, status and index.
    const after = await r.snapshot();
    expect({ ...after, refs: "", worktrees: "" }).toEqual({ ...before, refs: "", worktrees: "" });
  });

  it("starts a task with one dependency at that dependency's tip", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    const tipA = await branchWith(r, "termorch/run1/A", base, { "a.txt": "from A\n" });
    const wt = r.wtPath("B");
    const res = await prepareTaskWorktree({
      repo: r.root,
      path: wt,
      branch: "termorch/run1/B",
      base,
      deps: [{ task: "A", branch: "termorch/run1/A" }],
      include: [],
    });
    expect(res).toEqual({ ok: true, startCommit: tipA, reused: false });
    expect(await readFile(path.join(wt, "a.txt"), "utf8")).toBe("from A\n");
  });

  it("starts a task with two dependencies at an in-memory merge of both", async () => {
    const r = await repo({ "shared.txt": "1\n2\n3\n4\n5\n" });
    const base = await r.git("rev-parse", "HEAD");
    const before = await r.snapshot();
    const tipA = await branchWith(r, "termorch/run1/A", base, {
      "a.txt": "A\n",
      "shared.txt": "A\n2\n3\n4\n5\n",
    });
    const tipB = await branchWith(r, "termorch/run1/B", base, {
      "b.txt": "B\n",
      "shared.txt": "1\n2\n3\n4\nB\n",
    });
    const wt = r.wtPath("C");
    const res = await prepareTaskWorktree({
      repo: r.root,
      path: wt,
      branch: "termorch/run1/C",
      base,
      deps: [
        { task: "A", branch: "termorch/run1/A" },
        { task: "B", branch: "termorch/run1/B" },
      ],
      include: [],
    });
    if (!res.ok) throw new Error(`unexpected conflict: ${res.conflict.detail}`);
    expect(await readFile(path.join(wt, "a.txt"), "utf8")).toBe("A\n");
    expect(await readFile(path.join(wt, "b.txt"), "utf8")).toBe("B\n");
    expect(await readFile(path.join(wt, "shared.txt"), "utf8")).toBe("A\n2\n3\n4\nB\n");
    // A real merge commit whose parents are the dependency tips, authored by termorch.
    expect((await g(wt, "rev-parse", "HEAD^1", "HEAD^2")).split("\n")).toEqual([tipA, tipB]);
    expect(await g(wt, "log", "-1", "--format=%an <%ae>")).toBe("termorch <termorch@localhost>");
    expect(await g(wt, "status", "--porcelain")).toBe("");
    const after = await r.snapshot();
    expect(after.head).toBe(before.head);
    expect(after.status).toBe(before.status);
    expect(after.index).toBe(before.index);
  });

  it("starts at the tip of a dependency that already contains the other (a chain)", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    const tipA = await branchWith(r, "termorch/run1/A", base, { "a.txt": "A\n" });
    const tipB = await branchWith(r, "termorch/run1/B", tipA, { "b.txt": "B\n" });
    const res = await prepareTaskWorktree({
      repo: r.root,
      path: r.wtPath("C"),
      branch: "termorch/run1/C",
      base,
      deps: [
        { task: "A", branch: "termorch/run1/A" },
        { task: "B", branch: "termorch/run1/B" },
      ],
      include: [],
    });
    expect(res).toEqual({ ok: true, startCommit: tipB, reused: false });
  });

  it("creates nothing when the dependencies conflict, and names them and the files", async () => {
    const r = await repo({ "shared.txt": "base\n", "other.txt": "o\n" });
    const base = await r.git("rev-parse", "HEAD");
    await branchWith(r, "termorch/run1/A", base, { "shared.txt": "A\n", "a.txt": "A\n" });
    await branchWith(r, "termorch/run1/B", base, { "shared.txt": "B\n", "b.txt": "B\n" });
    const before = await r.snapshot();
    const wt = r.wtPath("C");
    const res = await prepareTaskWorktree({
      repo: r.root,
      path: wt,
      branch: "termorch/run1/C",
      base,
      deps: [
        { task: "A", branch: "termorch/run1/A" },
        { task: "B", branch: "termorch/run1/B" },
      ],
      include: [],
    });
    expect(res.ok).toBe(false);
    if (res.ok) return;
    expect(res.conflict.tasks).toEqual(["A", "B"]);
    expect(res.conflict.files).toEqual(["shared.txt"]);
    expect(res.conflict.detail).toMatch(/content/);
    expect(await exists(wt)).toBe(false);
    expect(await r.git("branch", "--list", "termorch/run1/C")).toBe("");
    expect(await r.snapshot()).toEqual(before);
  });

  it("links include paths into the worktree and never commits them", async () => {
    const r = await repo({ "src/app.js": "app\n" });
    const base = await r.git("rev-parse", "HEAD");
    await r.write("node_modules/dep/index.js", "module.exports = 1;\n");
    await r.write(".env", "SECRET=1\n");
    await r.write("tools/bin/helper", "#!/bin/sh\n");
    const wt = r.wtPath("A");
    const include = ["node_modules", ".env", "tools/bin/"];
    const res = await prepareTaskWorktree({
      repo: r.root,
      path: wt,
      branch: "termorch/run1/A",
      base,
      deps: [],
      include,
    });
    expect(res.ok).toBe(true);
    expect((await lstat(path.join(wt, "node_modules"))).isSymbolicLink()).toBe(true);
    expect(await readlink(path.join(wt, "node_modules"))).toBe(path.join(r.root, "node_modules"));
    expect(await readFile(path.join(wt, "node_modules/dep/index.js"), "utf8")).toBe("module.exports = 1;\n");
    expect(await readFile(path.join(wt, ".env"), "utf8")).toBe("SECRET=1\n");
    expect((await lstat(path.join(wt, "tools/bin"))).isSymbolicLink()).toBe(true);

    // The agent works, even runs `git add -A` itself; termorch's commit leaves the links out.
    await writeFile(path.join(wt, "src/app.js"), "app v2\n");
    await g(wt, "add", "-A");
    const tip = await commitTaskChanges(wt, { message: "task A", exclude: include });
    const files = (await g(wt, "ls-tree", "-r", "--name-only", tip)).split("\n");
    expect(files).toEqual(["src/app.js"]);
    expect(await g(wt, "diff", "--name-only", base, tip)).toBe("src/app.js");
    // The links are still there for the rest of the task's life (tests_cmd), and the
    // workspace's own files were not touched through them.
    expect((await lstat(path.join(wt, "node_modules"))).isSymbolicLink()).toBe(true);
    expect(await r.read(".env")).toBe("SECRET=1\n");
  });

  it("rejects a missing include path and leaves nothing behind", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    const wt = r.wtPath("A");
    const err = await prepareTaskWorktree({
      repo: r.root,
      path: wt,
      branch: "termorch/run1/A",
      base,
      deps: [],
      include: ["node_modules"],
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InputError);
    expect((err as Error).message).toMatch(/"node_modules" does not exist in the workspace/);
    expect(await exists(wt)).toBe(false);
    expect(await r.git("branch", "--list", "termorch/run1/A")).toBe("");
    expect((await listWorktrees(r.root)).length).toBe(1);
  });

  it("rejects include paths that escape the workspace", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    for (const bad of ["../outside", "/etc", ".git/config", "."]) {
      await expect(
        prepareTaskWorktree({
          repo: r.root,
          path: r.wtPath("A"),
          branch: "termorch/run1/A",
          base,
          deps: [],
          include: [bad],
        }),
      ).rejects.toBeInstanceOf(InputError);
    }
    expect(await r.git("branch", "--list", "termorch/*")).toBe("");
  });

  it("refuses to reuse a branch that already exists", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    await r.git("branch", "termorch/run1/A");
    const err = await prepareTaskWorktree({
      repo: r.root,
      path: r.wtPath("A"),
      branch: "termorch/run1/A",
      base,
      deps: [],
      include: [],
    }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitError);
    expect((err as Error).message).toMatch(/cannot create branch termorch\/run1\/A/);
    expect(await exists(r.wtPath("A"))).toBe(false);
  });

  it("never touches an existing directory at the worktree path, and creates no branch", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    const wt = r.wtPath("A");
    await mkdir(wt, { recursive: true });
    await writeFile(path.join(wt, "precious.txt"), "keep me\n");
    await expect(
      prepareTaskWorktree({ repo: r.root, path: wt, branch: "termorch/run1/A", base, deps: [], include: [] }),
    ).rejects.toBeInstanceOf(GitError);
    expect(await readFile(path.join(wt, "precious.txt"), "utf8")).toBe("keep me\n");
    expect(await r.git("branch", "--list", "termorch/*")).toBe("");
  });

  it("prepares many worktrees of one repository concurrently", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    await r.write("node_modules/x.js", "x\n");
    const ids = Array.from({ length: 16 }, (_, i) => `T${i}`);
    const results = await Promise.all(
      ids.map((id) =>
        prepareTaskWorktree({
          repo: r.root,
          path: r.wtPath(id),
          branch: `termorch/run1/${id}`,
          base,
          deps: [],
          include: ["node_modules"],
        }),
      ),
    );
    expect(results.every((x) => x.ok)).toBe(true);
    const wts = await listWorktrees(r.root);
    expect(wts.map((w) => w.branch).sort()).toEqual(
      ["refs/heads/main", ...ids.map((id) => `refs/heads/termorch/run1/${id}`)].sort(),
    );
    await Promise.all(ids.map((id) => removeWorktree(r.root, r.wtPath(id))));
    const deleted = await Promise.all(
      ids.map((id) => deleteBranch(r.root, `termorch/run1/${id}`, { force: false })),
    );
    // Their tips are the base, which main contains: nothing would be lost.
    expect(deleted.every((d) => d.status === "deleted")).toBe(true);
    expect(await listWorktrees(r.root)).toHaveLength(1);
    expect(await r.git("branch", "--list", "termorch/*")).toBe("");
  });
});

describe("prepareDetachedWorktree", () => {
  it("checks out a commit without creating a branch, with include links", async () => {
    const r = await repo({ "a.txt": "a\n" });
    const base = await r.git("rev-parse", "HEAD");
    await r.write(".env", "X=1\n");
    const wt = r.wtPath("integration");
    await prepareDetachedWorktree({ repo: r.root, path: wt, commit: base, include: [".env"] });
    expect(await g(wt, "rev-parse", "HEAD")).toBe(base);
    expect(await g(wt, "symbolic-ref", "-q", "HEAD").catch(() => "detached")).toBe("detached");
    expect(await readFile(path.join(wt, ".env"), "utf8")).toBe("X=1\n");
    await removeWorktree(r.root, wt);
    expect(await exists(wt)).toBe(false);
  });
});

describe("removeWorktree", () => {
  it("removes a worktree with untracked files and links without following the links", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    await r.write("node_modules/keep.js", "keep\n");
    const wt = r.wtPath("A");
    await prepareTaskWorktree({
      repo: r.root,
      path: wt,
      branch: "termorch/run1/A",
      base,
      deps: [],
      include: ["node_modules"],
    });
    await writeFile(path.join(wt, "scratch.txt"), "s\n");
    await removeWorktree(r.root, wt);
    expect(await exists(wt)).toBe(false);
    expect(await r.read("node_modules/keep.js")).toBe("keep\n");
    expect(await listWorktrees(r.root)).toHaveLength(1);
  });

  it("prunes a worktree whose directory is already gone, and ignores unknown paths", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    const wt = r.wtPath("A");
    await prepareTaskWorktree({
      repo: r.root,
      path: wt,
      branch: "termorch/run1/A",
      base,
      deps: [],
      include: [],
    });
    await rm(wt, { recursive: true, force: true });
    await removeWorktree(r.root, wt);
    expect(await listWorktrees(r.root)).toHaveLength(1);
    await removeWorktree(r.root, path.join(r.tmp, "never-was-a-worktree"));
    const stray = path.join(r.tmp, "stray");
    await mkdir(stray);
    await removeWorktree(r.root, stray);
    expect((await stat(stray)).isDirectory()).toBe(true);
  });
});

describe("deleteBranch", () => {
  it("keeps a branch whose commits no other ref contains unless forced", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    const tip = await branchWith(r, "termorch/run1/A", base, { "a.txt": "A\n" });
    const kept = await deleteBranch(r.root, "termorch/run1/A", { force: false });
    expect(kept.status).toBe("kept");
    expect(await r.git("rev-parse", "termorch/run1/A")).toBe(tip);
    expect(await deleteBranch(r.root, "termorch/run1/A", { force: true })).toEqual({
      status: "deleted",
      commit: tip,
    });
    expect(await deleteBranch(r.root, "termorch/run1/A", { force: true })).toEqual({ status: "absent" });
  });

  it("deletes a branch another ref contains", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    const tip = await branchWith(r, "termorch/run1/A", base, { "a.txt": "A\n" });
    await r.git("update-ref", "refs/heads/termorch/run1/integration", tip);
    expect(await deleteBranch(r.root, "termorch/run1/A", { force: false })).toEqual({
      status: "deleted",
      commit: tip,
    });
  });

  it("never deletes a branch checked out in a worktree", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    const wt = r.wtPath("A");
    await prepareTaskWorktree({
      repo: r.root,
      path: wt,
      branch: "termorch/run1/A",
      base,
      deps: [],
      include: [],
    });
    const res = await deleteBranch(r.root, "termorch/run1/A", { force: true });
    expect(res.status).toBe("kept");
    expect(await g(wt, "rev-parse", "HEAD")).toBe(base);
  });
});

describe("removeWorktrees and deleteMergedBranches (the cleanup after a merge)", () => {
  it("removes the named worktrees in one go, never following include links, and leaves others alone", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    await r.write("node_modules/keep.js", "keep\n");
    const paths = ["A", "B", "C"].map((id) => r.wtPath(id));
    for (const [i, p] of paths.entries())
      await prepareTaskWorktree({
        repo: r.root,
        path: p,
        branch: `termorch/run1/${"ABC"[i]}`,
        base,
        deps: [],
        include: ["node_modules"],
      });
    await writeFile(path.join(paths[0]!, "scratch.txt"), "s\n");
    const stray = path.join(r.tmp, "stray");
    await mkdir(stray);
    const removed = await removeWorktrees(r.root, [paths[0]!, paths[1]!, stray]);
    expect(removed.sort()).toEqual([paths[0]!, paths[1]!].map((p) => path.resolve(p)).sort());
    expect(await exists(paths[0]!)).toBe(false);
    expect(await exists(paths[1]!)).toBe(false);
    expect(await exists(paths[2]!)).toBe(true);
    expect((await stat(stray)).isDirectory()).toBe(true);
    expect(await r.read("node_modules/keep.js")).toBe("keep\n");
    expect((await listWorktrees(r.root)).map((w) => path.resolve(w.path))).toEqual([
      path.resolve(r.root),
      path.resolve(paths[2]!),
    ]);
  });

  it("deletes only branches the merged commit contains and keeps checked-out ones", async () => {
    const r = await repo();
    const base = await r.git("rev-parse", "HEAD");
    const a = await branchWith(r, "termorch/run1/A", base, { "a.txt": "A\n" });
    const b = await branchWith(r, "termorch/run1/B", a, { "b.txt": "B\n" });
    const c = await branchWith(r, "termorch/run1/C", base, { "c.txt": "C\n" });
    await prepareTaskWorktree({
      repo: r.root,
      path: r.wtPath("D"),
      branch: "termorch/run1/D",
      base,
      deps: [],
      include: [],
    });
    const kept = await deleteMergedBranches(
      r.root,
      ["termorch/run1/A", "termorch/run1/B", "termorch/run1/C", "termorch/run1/D", "termorch/run1/gone"],
      b,
    );
    // C is not in b (its commit would be lost); D is checked out; "gone" never existed.
    expect(kept.sort()).toEqual(["termorch/run1/C", "termorch/run1/D", "termorch/run1/gone"]);
    expect(await r.git("rev-parse", "termorch/run1/C")).toBe(c);
    expect(await r.git("for-each-ref", "--format=%(refname)", "refs/heads/termorch/run1/A")).toBe("");
    expect(await r.git("for-each-ref", "--format=%(refname)", "refs/heads/termorch/run1/B")).toBe("");
  });
});
