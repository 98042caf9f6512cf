import { lstat } from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { advanceTarget } from "../../src/git/advance.js";
import {
  checkMerge,
  createIntegrationCommit,
  type MergeItem,
  mergeOntoMovedTarget,
} from "../../src/git/merge.js";
import { branchWith, makeRepo, type TestRepo } from "../fixtures/git-repo.js";

const REF = "refs/heads/main";
let r: TestRepo;
afterEach(async () => {
  await r.cleanup();
});

/** base: app.txt, notes.txt; tasks A (changes app.txt, adds a.txt) and B (adds b/b.txt), integrated. */
async function integrated(): Promise<{ base: string; integration: string; items: MergeItem[] }> {
  r = await makeRepo({ "app.txt": "app v1\n", "notes.txt": "notes\n" });
  const base = await r.git("rev-parse", "HEAD");
  const items: MergeItem[] = [
    {
      task: "A",
      commit: await branchWith(r, "termorch/run1/A", base, { "app.txt": "app v2\n", "a.txt": "A\n" }),
    },
    { task: "B", commit: await branchWith(r, "termorch/run1/B", base, { "b/b.txt": "B\n" }) },
  ];
  const check = await checkMerge(r.root, base, items);
  const integration = await createIntegrationCommit(r.root, {
    tree: check.tree as string,
    parents: check.parents,
    message: "termorch: integrate run1",
    branch: "termorch/run1/integration",
  });
  return { base, integration, items };
}

async function exists(rel: string): Promise<boolean> {
  return (await lstat(path.join(r.root, rel)).catch(() => null)) !== null;
}

describe("advanceTarget", () => {
  it("advances the checked-out target and updates the work tree, keeping the user's other changes", async () => {
    const { base, integration } = await integrated();
    await r.write("notes.txt", "notes, uncommitted\n");
    await r.write("scratch.txt", "untracked\n");
    const res = await advanceTarget(r.root, { ref: REF, expectedOld: base, newCommit: integration });
    expect(res).toEqual({ status: "advanced", ref: REF, old: base, new: integration, worktree: r.root });
    expect(await r.git("rev-parse", "HEAD")).toBe(integration);
    expect(await r.read("app.txt")).toBe("app v2\n");
    expect(await r.read("a.txt")).toBe("A\n");
    expect(await r.read("b/b.txt")).toBe("B\n");
    expect(await r.read("notes.txt")).toBe("notes, uncommitted\n");
    expect(await r.git("status", "--porcelain")).toBe(" M notes.txt\n?? scratch.txt");
    expect(await r.git("reflog", "-1", "--format=%gs", "main")).toBe("termorch: merge run");
  });

  it("reports moved and changes nothing when the target is no longer at the expected commit", async () => {
    const { base, integration } = await integrated();
    await r.write("user.txt", "a commit made during the run\n");
    const userCommit = await r.commitAll("user's commit");
    const before = await r.snapshot();
    const res = await advanceTarget(r.root, { ref: REF, expectedOld: base, newCommit: integration });
    expect(res).toEqual({ status: "moved", ref: REF, expected: base, current: userCommit });
    expect(await r.snapshot()).toEqual(before);
  });

  it("merges onto a target that moved and then advances it", async () => {
    const { base, integration, items } = await integrated();
    await r.write("user.txt", "a commit made during the run\n");
    const userCommit = await r.commitAll("user's commit");
    const first = await advanceTarget(r.root, { ref: REF, expectedOld: base, newCommit: integration });
    expect(first.status).toBe("moved");
    const merged = await mergeOntoMovedTarget(r.root, {
      target: userCommit,
      integration,
      base,
      items,
      message: "termorch: integrate run1 onto main",
      branch: "termorch/run1/integration",
    });
    if (!merged.ok) throw new Error(merged.conflicts[0]?.detail);
    const res = await advanceTarget(r.root, { ref: REF, expectedOld: userCommit, newCommit: merged.commit });
    expect(res.status).toBe("advanced");
    expect(await r.read("user.txt")).toBe("a commit made during the run\n");
    expect(await r.read("a.txt")).toBe("A\n");
    expect(await r.git("status", "--porcelain")).toBe("");
  });

  it("rolls back ref, index and work tree when a step after the work tree update fails", async () => {
    const { base, integration } = await integrated();
    await r.write("notes.txt", "notes, uncommitted\n");
    await r.write("app.txt.orig", "untracked\n");
    await r.write("staged.txt", "staged by the user\n");
    await r.git("add", "staged.txt");
    const before = await r.snapshot();
    let sawNewTree = false;
    const res = await advanceTarget(r.root, {
      ref: REF,
      expectedOld: base,
      newCommit: integration,
      hooks: {
        afterWorktreeUpdate: async () => {
          sawNewTree = (await r.read("app.txt")) === "app v2\n";
          throw new Error("injected failure");
        },
      },
    });
    expect(sawNewTree).toBe(true);
    expect(res.status).toBe("rolled_back");
    if (res.status !== "rolled_back") return;
    expect(res.detail).toMatch(/injected failure/);
    expect(res.old).toBe(base);
    const after = await r.snapshot();
    // Same HEAD, same status (including the user's unstaged, staged and untracked files), same refs.
    expect(after.head).toBe(base);
    expect(after.status).toBe(before.status);
    expect(after.refs).toBe(before.refs);
    expect(await r.read("app.txt")).toBe("app v1\n");
    expect(await exists("a.txt")).toBe(false);
    expect(await exists("b/b.txt")).toBe(false);
    expect(await r.read("notes.txt")).toBe("notes, uncommitted\n");
    expect(await r.git("diff", "--cached", "--name-only")).toBe("staged.txt");
  });

  it("rolls back the ref when a step right after the ref update fails", async () => {
    const { base, integration } = await integrated();
    const before = await r.snapshot();
    const res = await advanceTarget(r.root, {
      ref: REF,
      expectedOld: base,
      newCommit: integration,
      hooks: {
        afterRefUpdate: () => {
          throw new Error("injected failure");
        },
      },
    });
    expect(res.status).toBe("rolled_back");
    expect(await r.snapshot()).toEqual(before);
  });

  it("rolls back without deleting a file the user created while the update ran", async () => {
    const { base, integration } = await integrated();
    const res = await advanceTarget(r.root, {
      ref: REF,
      expectedOld: base,
      newCommit: integration,
      hooks: {
        // Passes the dry run, then appears where the update wants to write: read-tree fails.
        afterRefUpdate: () => r.write("a.txt", "the user's own a.txt\n"),
      },
    });
    expect(res.status).toBe("rolled_back");
    expect(await r.git("rev-parse", "HEAD")).toBe(base);
    expect(await r.read("a.txt")).toBe("the user's own a.txt\n");
    expect(await r.read("app.txt")).toBe("app v1\n");
    expect(await r.git("status", "--porcelain")).toBe("?? a.txt");
  });

  it("is blocked, changing nothing, when the update would overwrite uncommitted work", async () => {
    const { base, integration } = await integrated();
    await r.write("app.txt", "the user's uncommitted edit\n");
    await r.write("b/b.txt", "the user's untracked file\n");
    const before = await r.snapshot();
    const res = await advanceTarget(r.root, { ref: REF, expectedOld: base, newCommit: integration });
    expect(res.status).toBe("blocked");
    if (res.status !== "blocked") return;
    expect(res.detail).toMatch(/app\.txt/);
    expect(await r.snapshot()).toEqual(before);
    expect(await r.read("app.txt")).toBe("the user's uncommitted edit\n");
  });

  it("only moves the ref when the target is not checked out", async () => {
    const { base, integration } = await integrated();
    await r.git("checkout", "-q", "-b", "elsewhere");
    const res = await advanceTarget(r.root, { ref: "main", expectedOld: base, newCommit: integration });
    expect(res).toEqual({ status: "advanced", ref: REF, old: base, new: integration, worktree: null });
    expect(await r.git("rev-parse", "main")).toBe(integration);
    expect(await r.git("rev-parse", "HEAD")).toBe(base);
    expect(await r.git("status", "--porcelain")).toBe("");
  });
});
