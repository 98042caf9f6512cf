import { execFileSync } from "node:child_process";
import {
  appendFileSync,
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, expect } from "vitest";
import type { Report } from "../../src/contract/report.js";
import {
  killServer,
  ROOT,
  readReport,
  termorch,
  uniqueSocket,
  worktreesInUse,
} from "../integration/harness.js";

/** The bundles of public repositories (repos/README.md: what each is, how its suite runs offline). */
export const BUNDLES = resolve(
  process.env.TERMORCH_FIXTURE_REPOS || join(ROOT, "test", "realworld", "repos"),
);
if (!existsSync(join(BUNDLES, "kleur.bundle")))
  throw new Error(`no repository bundles in ${BUNDLES}: set TERMORCH_FIXTURE_REPOS to their folder`);

/** Who commits in the cloned repositories: termorch must author its commits as this user. */
export const USER = { name: "Rita Realworld", email: "rita@example.org" };

export function sh(cwd: string, cmd: string, args: string[], env: Record<string, string> = {}): string {
  return execFileSync(cmd, args, {
    cwd,
    encoding: "utf8",
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
    maxBuffer: 64 * 1024 * 1024,
  });
}

export const git = (repo: string, ...args: string[]): string => sh(repo, "git", args);

/**
 * One test file's world: a temp folder, a private tmux socket (killed after the file), and the
 * clones made in it.
 */
export function corpus(tag: string) {
  const socket = uniqueSocket(`rw-${tag}`);
  const root = mkdtempSync(join(tmpdir(), `termorch-rw-${tag}-`));
  afterAll(() => {
    killServer(socket);
    // Worktrees of failed runs live under the CLI's TMPDIR (the integration harness's temp folder).
    rmSync(root, { recursive: true, force: true });
  });

  /** Clones `<name>.bundle` as a user would have it: their identity configured, on the default branch. */
  const clone = (name: string): string => {
    const repo = join(root, name);
    sh(root, "git", ["clone", "-q", join(BUNDLES, `${name}.bundle`), repo]);
    git(repo, "config", "user.name", USER.name);
    git(repo, "config", "user.email", USER.email);
    return repo;
  };

  /** Bash agents live outside the repository, like any tool the user has installed. */
  const agents = join(root, "agents");
  mkdirSync(agents, { recursive: true });
  const agent = (name: string, body: string): string => {
    const file = join(agents, `${name}.sh`);
    writeFileSync(file, `#!/usr/bin/env bash\nset -euo pipefail\n${body}\n`);
    chmodSync(file, 0o755);
    return file;
  };

  /**
   * Writes the assignments file (outside the repository) and a context file per task. Context
   * files must lie in the workspace; like a user would, they go to a folder git is told to
   * ignore (`.git/info/exclude`), so they never show in `git status`.
   */
  const assignments = (
    repo: string,
    body: { run_id: string; tasks: Array<Record<string, unknown>>; [key: string]: unknown },
  ): string => {
    const dir = join(root, `${body.run_id}-run`);
    const contexts = join(repo, ".contexts");
    mkdirSync(contexts, { recursive: true });
    mkdirSync(dir, { recursive: true });
    appendFileSync(join(repo, ".git", "info", "exclude"), "/.contexts/\n");
    const tasks = body.tasks.map((t) => {
      writeFileSync(join(contexts, `${t.id}.md`), `# ${t.id}\n\nDo the ${t.id} part.\n`);
      return { dependencies: [], ...t, context_path: `.contexts/${t.id}.md` };
    });
    const environment = { ...(body.environment as object), workspace_dir: repo };
    const file = join(dir, "assignments.json");
    writeFileSync(file, JSON.stringify({ ...body, tasks, environment }, null, 2));
    return file;
  };

  const run = (args: string[], env: Record<string, string> = {}) =>
    termorch(args, { socket, env, timeoutMs: 300_000 });

  return { socket, root, clone, agent, assignments, run };
}

/**
 * What every run on a real repository must leave: the user's branch moved to the run's
 * integration commit by a fast-forward (base an ancestor, reflog one termorch entry), ref, index
 * and work tree in agreement, exactly the expected files changed, no commit of the run touching
 * anything else (include links, termorch's files, caches), no task branch or worktree left.
 */
export function expectCleanMerge(
  repo: string,
  report: Report,
  o: { base: string; branch: string; files: string[] },
): void {
  expect(report.merge.result, report.merge.reason ?? "").toBe("success");
  const head = git(repo, "rev-parse", "HEAD").trim();
  expect(report.merge.result_commit).toBe(head);
  expect(git(repo, "symbolic-ref", "HEAD").trim()).toBe(`refs/heads/${o.branch}`);
  expect(() => git(repo, "merge-base", "--is-ancestor", o.base, head)).not.toThrow();
  expect(git(repo, "log", "-1", "--format=%s", head).trim()).toBe(`termorch: integrate run ${report.run_id}`);
  // One move of the branch, from the base straight to the result.
  const reflog = git(repo, "reflog", "--format=%H %gs", o.branch).trim().split("\n");
  expect(reflog[0]).toBe(`${head} termorch: run ${report.run_id}`);
  expect(reflog[1]?.split(" ")[0]).toBe(o.base);
  // Ref, index and work tree agree (ignored files such as node_modules aside).
  expect(git(repo, "status", "--porcelain", "--untracked-files=all")).toBe("");
  const changed = git(repo, "diff", "--name-only", o.base, head).trim().split("\n").filter(Boolean);
  expect(changed.sort()).toEqual([...o.files].sort());
  // No commit of the run ever held anything else, not even for one commit.
  const touched = new Set(
    git(repo, "log", "--format=", "--name-only", `${o.base}..${head}`).split("\n").filter(Boolean),
  );
  expect([...touched].sort()).toEqual([...o.files].sort());
  // Commits are the user's, marked as termorch's in a trailer.
  for (const line of git(repo, "log", "--format=%an <%ae>|%cn <%ce>", `${o.base}..${head}`)
    .trim()
    .split("\n"))
    expect(line).toBe(`${USER.name} <${USER.email}>|${USER.name} <${USER.email}>`);
  expect(git(repo, "log", "-1", "--format=%B", head)).toMatch(/^Termorch-Run: /m);
  // Nothing of the run is left in the repository.
  expect(git(repo, "for-each-ref", "--format=%(refname)", "refs/heads/termorch/")).toBe("");
  expect(worktreesInUse(repo)).toEqual([]);
}

/** The report of a finished run in its own run directory. */
export function reportOf(file: string): Report {
  return readReport(join(file, ".."));
}

/** Every file in `dir` (no recursion), for checks that nothing was added beside the user's files. */
export const entries = (dir: string): string[] => readdirSync(dir).sort();
