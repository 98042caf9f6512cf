import { chmod, mkdir, mkdtemp, realpath, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it, vi } from "vitest";
import { GitError, type GitVersionError } from "../../src/git/errors.js";
import { dirtyTrackedFiles, git, repoInfo, requireGitVersion } from "../../src/git/repo.js";
import { makeRepo, type TestRepo } from "../fixtures/git-repo.js";

let repos: TestRepo[] = [];
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(repos.map((r) => r.cleanup()));
  await Promise.all(cleanups.splice(0).map((c) => c()));
  repos = [];
});
async function repo(files?: Record<string, string>): Promise<TestRepo> {
  const r = await makeRepo(files);
  repos.push(r);
  return r;
}

describe("repoInfo", () => {
  it("describes a repository from its root and from a subdirectory", async () => {
    const r = await repo({ "src/a.txt": "a\n" });
    const head = await r.git("rev-parse", "HEAD");
    expect(await repoInfo(r.root)).toEqual({ root: r.root, head, ref: "refs/heads/main" });
    expect(await repoInfo(path.join(r.root, "src"))).toEqual({ root: r.root, head, ref: "refs/heads/main" });
  });

  it("returns null outside any repository and for a missing directory", async () => {
    const dir = await realpath(await mkdtemp(path.join(os.tmpdir(), "termorch-git-nonrepo-")));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    // A ceiling keeps git from finding a repository that happens to enclose the temp dir.
    vi.stubEnv("GIT_CEILING_DIRECTORIES", path.dirname(dir));
    try {
      expect(await repoInfo(dir)).toBeNull();
      expect(await repoInfo(path.join(dir, "missing"))).toBeNull();
    } finally {
      vi.unstubAllEnvs();
    }
  });

  it("reports a detached HEAD with ref null", async () => {
    const r = await repo();
    const head = await r.git("rev-parse", "HEAD");
    await r.git("checkout", "-q", "--detach");
    expect(await repoInfo(r.root)).toEqual({ root: r.root, head, ref: null });
  });

  it("reports an unborn branch with head null", async () => {
    const r = await repo({});
    expect(await repoInfo(r.root)).toEqual({ root: r.root, head: null, ref: "refs/heads/main" });
  });
});

describe("dirtyTrackedFiles", () => {
  it("lists staged and unstaged changes to tracked files but not untracked files", async () => {
    const r = await repo({ "a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n", "d.txt": "d\n" });
    expect(await dirtyTrackedFiles(r.root)).toEqual([]);
    await r.write("untracked.txt", "u\n");
    await r.write("run/assignments.json", "{}\n");
    expect(await dirtyTrackedFiles(r.root)).toEqual([]);
    await r.write("a.txt", "changed\n"); // unstaged
    await r.write("b.txt", "staged\n");
    await r.git("add", "b.txt"); // staged
    await r.git("rm", "-q", "c.txt"); // staged deletion
    await r.git("mv", "d.txt", "e.txt"); // staged rename
    expect(await dirtyTrackedFiles(r.root)).toEqual(["a.txt", "b.txt", "c.txt", "d.txt", "e.txt"]);
  });

  it("counts files staged on an unborn branch", async () => {
    const r = await repo({});
    await r.write("new.txt", "n\n");
    await r.git("add", "new.txt");
    await r.write("loose.txt", "l\n");
    expect(await dirtyTrackedFiles(r.root)).toEqual(["new.txt"]);
  });
});

describe("git()", () => {
  it("throws a GitError naming the command and git's message", async () => {
    const r = await repo();
    const err = await git(r.root, ["rev-parse", "--verify", "no-such-branch"]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GitError);
    expect((err as GitError).message).toMatch(/git rev-parse --verify no-such-branch failed/);
    expect((err as GitError).failure.status).toBe(128);
    expect((err as GitError).exitCode).toBe(70);
  });

  it("returns allowed non-zero exits as values", async () => {
    const r = await repo();
    const res = await git(r.root, ["rev-parse", "-q", "--verify", "nope"], { allowExit: [0, 1] });
    expect(res.exitCode).toBe(1);
  });

  it("ignores GIT_DIR and GIT_INDEX_FILE inherited from a hook", async () => {
    const a = await repo({ "a.txt": "a\n" });
    const b = await repo({ "b.txt": "b\n" });
    vi.stubEnv("GIT_DIR", path.join(b.root, ".git"));
    vi.stubEnv("GIT_INDEX_FILE", path.join(b.root, ".git", "index"));
    try {
      expect((await git(a.root, ["ls-files"])).stdout).toBe("a.txt\n");
    } finally {
      vi.unstubAllEnvs();
    }
  });
});

describe("requireGitVersion", () => {
  it("accepts the installed git", async () => {
    const v = await requireGitVersion();
    expect(v.major > 2 || (v.major === 2 && v.minor >= 38)).toBe(true);
    // Asked once per process: the second answer is the same object.
    expect(await requireGitVersion()).toBe(v);
  });

  it("rejects a git older than 2.38 with an EnvironmentError", async () => {
    const bin = await mkdtemp(path.join(os.tmpdir(), "termorch-git-oldbin-"));
    cleanups.push(() => rm(bin, { recursive: true, force: true }));
    await mkdir(bin, { recursive: true });
    await writeFile(path.join(bin, "git"), '#!/bin/sh\necho "git version 2.30.2"\n');
    await chmod(path.join(bin, "git"), 0o755);
    vi.stubEnv("PATH", `${bin}${path.delimiter}${process.env.PATH ?? ""}`);
    vi.resetModules();
    try {
      // A fresh module instance, so the version cached above is not reused.
      const fresh = await import("../../src/git/repo.js");
      const freshErrors = await import("../../src/errors.js");
      const err = await fresh.requireGitVersion().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(freshErrors.EnvironmentError);
      expect((err as Error).name).toBe("GitVersionError");
      expect((err as Error).message).toMatch(/git 2\.30\.2 is too old: termorch needs git 2\.38 or newer/);
      expect((err as GitVersionError).exitCode).toBe(2);
    } finally {
      vi.unstubAllEnvs();
      vi.resetModules();
    }
  });
});
