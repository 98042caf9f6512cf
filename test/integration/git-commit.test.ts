import { mkdir, rm, symlink, writeFile } from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { changedFiles, commitTaskChanges, diffPatch } from "../../src/git/commit.js";
import { GitError } from "../../src/git/errors.js";
import { prepareTaskWorktree } from "../../src/git/worktree.js";
import { g, makeRepo, type TestRepo } from "../fixtures/git-repo.js";

let r: TestRepo;
let base: string;
let wt: string;
const BRANCH = "termorch/run1/A";

beforeEach(async () => {
  r = await makeRepo({
    "keep.txt": "keep\n",
    "modify.txt": "old\n",
    "delete.txt": "bye\n",
    "rename-me.txt": "a fairly long line so that rename detection has content to match\n",
    ".gitignore": "*.log\n",
  });
  base = await r.git("rev-parse", "HEAD");
  wt = r.wtPath("A");
  const res = await prepareTaskWorktree({
    repo: r.root,
    path: wt,
    branch: BRANCH,
    base,
    deps: [],
    include: [],
  });
  expect(res.ok).toBe(true);
});
afterEach(async () => {
  await r.cleanup();
});

const write = async (rel: string, content: string | Uint8Array) => {
  await mkdir(path.dirname(path.join(wt, rel)), { recursive: true });
  await writeFile(path.join(wt, rel), content);
};

async function branchWithChange(branch: string, rel: string, content: string): Promise<void> {
  const other = r.wtPath(`setup-${branch}`);
  await r.git("worktree", "add", "-q", other, branch);
  await writeFile(path.join(other, rel), content);
  await g(other, "commit", "-q", "-am", `change ${rel} on ${branch}`);
  await r.git("worktree", "remove", other);
}

describe("commitTaskChanges", () => {
  it("commits added, modified, deleted, renamed and untracked files, but not ignored ones", async () => {
    await write("modify.txt", "new\n");
    await rm(path.join(wt, "delete.txt"));
    await write("staged.txt", "staged\n");
    await g(wt, "add", "staged.txt");
    await write("dir/untracked.txt", "u\n");
    await write("debug.log", "ignored\n");
    await g(wt, "mv", "rename-me.txt", "renamed.txt");
    const tip = await commitTaskChanges(wt, { message: "termorch: task A (echo-agent)", exclude: [] });
    expect(tip).not.toBe(base);
    expect(await r.git("rev-parse", BRANCH)).toBe(tip);
    expect(await g(wt, "rev-parse", "HEAD")).toBe(tip);
    expect(await r.git("log", "-1", "--format=%an <%ae>|%cn|%s", tip)).toBe(
      "termorch <termorch@localhost>|termorch|termorch: task A (echo-agent)",
    );
    expect(await changedFiles(r.root, base, tip)).toEqual([
      "delete.txt",
      "dir/untracked.txt",
      "modify.txt",
      "rename-me.txt",
      "renamed.txt",
      "staged.txt",
    ]);
    // Only the ignored file is left over.
    expect(await g(wt, "status", "--porcelain", "--ignored")).toBe("!! debug.log");
  });

  it("makes no commit when nothing changed", async () => {
    expect(await commitTaskChanges(wt, { message: "m", exclude: [] })).toBe(base);
    expect(await r.git("rev-parse", BRANCH)).toBe(base);
  });

  it("keeps the agent's own commits and adds nothing when it committed everything", async () => {
    await write("agent.txt", "by the agent\n");
    await g(wt, "add", "agent.txt");
    await g(wt, "commit", "-q", "-m", "agent commit");
    const agentTip = await g(wt, "rev-parse", "HEAD");
    expect(await commitTaskChanges(wt, { message: "m", exclude: [] })).toBe(agentTip);
    expect(await r.git("log", "-1", "--format=%an", BRANCH)).toBe("Test User");
  });

  it("commits what the agent left uncommitted on top of its own commits", async () => {
    await write("agent.txt", "by the agent\n");
    await g(wt, "add", "agent.txt");
    await g(wt, "commit", "-q", "-m", "agent commit");
    const agentTip = await g(wt, "rev-parse", "HEAD");
    await write("later.txt", "left over\n");
    const tip = await commitTaskChanges(wt, { message: "m", exclude: [] });
    expect(await r.git("rev-parse", `${tip}^`)).toBe(agentTip);
    expect(await changedFiles(r.root, base, tip)).toEqual(["agent.txt", "later.txt"]);
  });

  it("strips include links the agent committed itself", async () => {
    await r.write(".env", "SECRET=1\n");
    await symlink(path.join(r.root, ".env"), path.join(wt, ".env"));
    await write("work.txt", "w\n");
    await g(wt, "add", "-A");
    await g(wt, "commit", "-q", "-m", "agent commits everything");
    await write("more.txt", "m\n");
    await g(wt, "add", "-A");
    await g(wt, "commit", "-q", "-m", "agent commits again");
    const tip = await commitTaskChanges(wt, { message: "m", exclude: [".env"], start: base });
    expect(await changedFiles(r.root, base, tip)).toEqual(["more.txt", "work.txt"]);
    expect((await diffPatch(r.root, base, tip)).toString()).not.toContain(".env");
    // The agent's commits are re-created without the link (message and author kept); none holds it.
    expect(await r.git("log", "--format=%an|%s", `${base}..${tip}`)).toBe(
      "Test User|agent commits again\nTest User|agent commits everything",
    );
    expect(await r.git("log", "--full-history", "--format=%H", `${base}..${tip}`, "--", ".env")).toBe("");
    expect(await g(wt, "status", "--porcelain", "--untracked-files=no")).toBe("");
  });

  it("refuses to commit unresolved conflicts or a detached HEAD", async () => {
    await g(wt, "checkout", "-q", "--detach");
    await expect(commitTaskChanges(wt, { message: "m", exclude: [] })).rejects.toThrow(/detached/);
    await g(wt, "checkout", "-q", BRANCH);
    await expect(
      commitTaskChanges(wt, { message: "m", exclude: [], branch: "termorch/run1/B" }),
    ).rejects.toThrow(GitError);
    // The agent left a merge with conflicts behind: committing it would record the markers.
    await r.git("branch", "other", base);
    await branchWithChange("other", "modify.txt", "other\n");
    await write("modify.txt", "mine\n");
    await g(wt, "commit", "-q", "-am", "mine");
    await g(wt, "merge", "-q", "other").catch(() => undefined);
    expect(await g(wt, "ls-files", "-u")).not.toBe("");
    await expect(commitTaskChanges(wt, { message: "m", exclude: [] })).rejects.toThrow(
      /unresolved merge conflicts/,
    );
  });
});

describe("diffPatch", () => {
  it("produces a binary-safe patch that applies to the base", async () => {
    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    await write("blob.bin", bytes);
    await write("modify.txt", "new\n");
    const tip = await commitTaskChanges(wt, { message: "m", exclude: [] });
    const patch = await diffPatch(r.root, base, tip);
    const text = patch.toString("utf8");
    expect(text).toContain("GIT binary patch");
    expect(text).toContain("diff --git a/modify.txt b/modify.txt");
    // Applying it to a fresh checkout of the base reproduces the task's tree.
    const check = r.wtPath("check");
    await r.git("worktree", "add", "-q", "--detach", check, base);
    const patchFile = path.join(r.tmp, "changes.patch");
    await writeFile(patchFile, patch);
    await g(check, "apply", "--index", patchFile);
    expect(await g(check, "write-tree")).toBe(await r.git("rev-parse", `${tip}^{tree}`));
  });

  it("is empty between equal commits", async () => {
    expect((await diffPatch(r.root, base, base)).length).toBe(0);
  });
});
