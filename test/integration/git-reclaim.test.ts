import { afterEach, describe, expect, it } from "vitest";
import { prepareTaskWorktree } from "../../src/git/worktree.js";
import { branchWith, g, makeRepo, type TestRepo } from "../fixtures/git-repo.js";

let r: TestRepo;
afterEach(async () => {
  await r.cleanup();
});

/** M starts from a merge of A1 and A2; its first preparation is interrupted (branch and worktree left). */
async function leftover() {
  r = await makeRepo({ "base.txt": "b\n" });
  const base = await r.git("rev-parse", "HEAD");
  await branchWith(r, "termorch/run1/A1", base, { "a1.txt": "1\n" });
  await branchWith(r, "termorch/run1/A2", base, { "a2.txt": "2\n" });
  const o = {
    repo: r.root,
    path: r.wtPath("M"),
    branch: "termorch/run1/M",
    base,
    deps: [
      { task: "A1", branch: "termorch/run1/A1" },
      { task: "A2", branch: "termorch/run1/A2" },
    ],
    include: [],
  };
  const first = await prepareTaskWorktree(o);
  if (!first.ok) throw new Error("setup failed");
  return { o, start: first.startCommit };
}

describe("prepareTaskWorktree with reclaim (a resumed run)", () => {
  it("takes over a leftover whose merge start commit was made again (same tree and parents, another hash)", async () => {
    const { o, start } = await leftover();
    // The same merge made by the interrupted process: same tree and parents, another hash.
    const [tree, p1, p2] = (await r.git("log", "-1", "--format=%T %P", start)).split(" ");
    const older = await g(
      r.root,
      "commit-tree",
      tree!,
      "-p",
      p1!,
      "-p",
      p2!,
      "-m",
      "termorch: merge A1, A2 (earlier)",
    );
    expect(older).not.toBe(start);
    await r.git("update-ref", "refs/heads/termorch/run1/M", older);
    await expect(prepareTaskWorktree(o)).rejects.toThrow(/reference already exists/);
    const again = await prepareTaskWorktree({ ...o, reclaim: true });
    expect(again.ok).toBe(true);
    expect(await g(o.path, "symbolic-ref", "HEAD")).toBe("refs/heads/termorch/run1/M");
    expect(await g(o.path, "status", "--porcelain")).toBe("");
  });

  it("refuses a branch with work on it, and one checked out somewhere else, leaving both alone", async () => {
    const { o } = await leftover();
    await g(o.path, "commit", "-q", "--allow-empty", "-m", "work");
    const tip = await r.git("rev-parse", "termorch/run1/M");
    await expect(prepareTaskWorktree({ ...o, reclaim: true })).rejects.toThrow(/holds commits beyond/);
    expect(await r.git("rev-parse", "termorch/run1/M")).toBe(tip);

    await g(o.path, "reset", "-q", "--hard", "HEAD^");
    await r.git("worktree", "move", o.path, r.wtPath("elsewhere"));
    await expect(prepareTaskWorktree({ ...o, reclaim: true })).rejects.toThrow(/checked out in .*elsewhere/);
    expect(await g(r.wtPath("elsewhere"), "symbolic-ref", "HEAD")).toBe("refs/heads/termorch/run1/M");
  });
});
