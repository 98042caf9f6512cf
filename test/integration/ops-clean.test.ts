import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { worktreesRoot } from "../../src/fs/names.js";
import { opsWorld, stateOf, waitForStatus } from "../fixtures/ops-helpers.js";
import { git, isAlive, tmuxSessions, uniqueSocket, writeAssignments } from "./harness.js";

const world = opsWorld(uniqueSocket("ops-clean"));
afterAll(() => world.teardown());

const branches = (repo: string) =>
  git(repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/termorch/").split("\n").filter(Boolean);
const registered = () => readdirSync(world.registry).map((n) => n.replace(/\.json$/, ""));

describe("termorch clean", () => {
  it("removes what a failed run left, keeps unmerged work unless --force, leaves a live run alone", async () => {
    // A failed run: A committed work that was never merged, B failed without changes, C failed
    // with uncommitted changes in its worktree.
    const failed = world.workspace();
    const file = writeAssignments(failed.dir, [
      { id: "A", env: { WRITE: "a.txt=A" } },
      { id: "B", env: { EXIT: "1" } },
      { id: "C", env: { WRITE: "c.txt=C", EXIT: "1" } },
    ]);
    expect((await world.cli(["run", file])).exitCode).toBe(1);
    const runId = stateOf(failed.dir)!.run_id;
    const wtRoot = join(worktreesRoot(), runId);
    expect(branches(failed.repo).sort()).toEqual(["A", "B", "C"].map((t) => `termorch/${runId}/${t}`));
    expect(tmuxSessions(world.socket)).toEqual(
      expect.arrayContaining([`termorch-${runId}-B`, `termorch-${runId}-C`]),
    );
    // A succeeded: its work is on its branch, and its worktree went into the warm pool.
    expect(existsSync(join(wtRoot, "A"))).toBe(false);

    // A live run on another workspace, in the same registry and on the same tmux server.
    const live = world.workspace();
    const gate = join(live.dir, "go");
    const liveFile = writeAssignments(live.dir, [{ id: "L", env: { WAIT_FILE: gate } }]);
    const liveRun = world.start(["run", liveFile]);
    await waitForStatus(live.dir, "L", "running");
    const liveId = stateOf(live.dir)!.run_id;

    const sweep = await world.cli(["clean"]);
    expect(sweep.exitCode).toBe(0);
    const out = sweep.stdout;
    expect(out).toContain(`run ${runId} (${failed.dir}): finished (exit 1)`);
    expect(out).toContain(`removed tmux session termorch-${runId}-B`);
    expect(out).toContain(`removed tmux session termorch-${runId}-C`);
    expect(out).toContain(`removed worktree ${join(wtRoot, "B")}`);
    expect(out).toContain(`removed branch termorch/${runId}/B`);
    expect(out).toMatch(new RegExp(`kept branch termorch/${runId}/A: .*no other ref contains.*--force`));
    expect(out).toMatch(new RegExp(`kept worktree ${join(wtRoot, "C")}: uncommitted changes \\(c\\.txt\\)`));
    expect(out).toContain(`still registered: termorch clean ${runId} --force`);
    expect(out).toContain(`run ${liveId} (${live.dir}): live`);
    expect(out).toContain(`cancel it first: termorch cancel ${liveId}`);

    expect(branches(failed.repo).sort()).toEqual([`termorch/${runId}/A`, `termorch/${runId}/C`]);
    expect(existsSync(join(wtRoot, "A"))).toBe(false);
    expect(existsSync(join(wtRoot, "C", "c.txt"))).toBe(true);
    expect(tmuxSessions(world.socket).filter((s) => s.startsWith(`termorch-${runId}-`))).toEqual([]);
    expect(registered()).toEqual(expect.arrayContaining([runId, liveId]));
    // The live run was not touched.
    expect(tmuxSessions(world.socket)).toContain(`termorch-${liveId}-L`);
    expect(isAlive(liveRun.pid!)).toBe(true);

    // Named explicitly, a live run is refused (exit 1) and still left alone.
    const refused = await world.cli(["clean", liveId]);
    expect(refused.exitCode).toBe(1);
    expect(refused.stdout).toContain("live");

    const forced = await world.cli(["clean", runId, "--force"]);
    expect(forced.exitCode).toBe(0);
    expect(forced.stdout).toContain(`removed worktree ${join(wtRoot, "C")}`);
    expect(forced.stdout).toContain(`removed branch termorch/${runId}/A`);
    expect(forced.stdout).toContain("unregistered");
    expect(branches(failed.repo)).toEqual([]);
    expect(existsSync(wtRoot)).toBe(false);
    // Nothing is left: the sweep emptied the pool (A's worktree), --force removed C's.
    expect(git(failed.repo, "worktree", "list", "--porcelain").match(/^worktree /gm)).toHaveLength(1);
    expect(registered()).not.toContain(runId);
    // The run's results stay: clean removes what a run left running, not what it reported.
    expect(existsSync(join(failed.dir, "execution_report.json"))).toBe(true);

    writeFileSync(gate, "");
    expect((await liveRun).exitCode).toBe(0);
    const after = await world.cli(["clean", liveId]);
    expect(after.exitCode).toBe(0);
    expect(after.stdout).toContain("unregistered");
    expect(registered()).toEqual([]);
  });

  it("cleans a run through the registry after a re-run into its folder was refused", async () => {
    const { dir, repo } = world.workspace();
    const file = writeAssignments(dir, [{ id: "A", env: { WRITE: "a.txt=A", EXIT: "1" } }]);
    expect((await world.cli(["run", file])).exitCode).toBe(1);
    const first = stateOf(dir)!.run_id;
    // Same file, same folder: the folder holds the first run's files, so the re-run is refused.
    const rerun = await world.cli(["run", file]);
    expect(rerun.exitCode).toBe(2);
    expect(rerun.stderr).toContain(`holds the files of run ${first}`);
    expect(stateOf(dir)!.run_id).toBe(first);

    const cleaned = await world.cli(["clean", first, "--force"]);
    expect(cleaned.exitCode).toBe(0);
    expect(cleaned.stdout).toContain(`removed tmux session termorch-${first}-A`);
    expect(cleaned.stdout).toContain(`removed worktree ${join(worktreesRoot(), first, "A")}`);
    expect(cleaned.stdout).toContain(`removed branch termorch/${first}/A`);
    expect(branches(repo)).toEqual([]);
  });

  it("--remote --older-than sweeps the refs of old runs unknown here off a scale-out remote, and keeps recent and registered ones", async () => {
    const { dir, repo } = world.workspace();
    const remote = join(dir, "remote.git");
    git(dir, "init", "--quiet", "--bare", remote);
    // A run of a week ago that no registry here knows, a recent one, and a registered one.
    const old = execFileSync("git", ["-C", repo, "commit-tree", "-m", "old", "HEAD^{tree}"], {
      encoding: "utf8",
      env: { ...process.env, GIT_COMMITTER_DATE: new Date(Date.now() - 8 * 86_400_000).toISOString() },
    }).trim();
    const file = writeAssignments(dir, [{ id: "A" }]);
    expect((await world.cli(["run", file])).exitCode).toBe(0);
    const registeredRun = stateOf(dir)!.run_id;
    for (const [commit, ref] of [
      [old, "refs/termorch/gone/base/A"],
      [old, "refs/termorch/gone/attempts/A/1"],
      ["HEAD", "refs/termorch/recent/base/A"],
      [old, `refs/termorch/${registeredRun}/base/A`],
    ])
      git(repo, "push", "--quiet", remote, `${commit}:${ref}`);

    const refused = await world.cli(["clean", "--remote", remote, "--older-than", "a week"]);
    expect(refused.exitCode).toBe(2);
    expect(refused.stderr).toContain('--older-than "a week" is not an age');
    expect(git(remote, "for-each-ref").split("\n").filter(Boolean)).toHaveLength(4);

    const r = await world.cli(["clean", "--remote", remote, "--older-than", "7d"]);
    expect(r.exitCode, r.stderr).toBe(0);
    expect(r.stdout).toContain("removed run gone's 2 ref(s)");
    expect(r.stdout).toContain("kept run recent");
    expect(r.stdout).toContain(`kept run ${registeredRun}: registered here`);
    expect(git(remote, "for-each-ref", "--format=%(refname)").split("\n").filter(Boolean).sort()).toEqual(
      [`refs/termorch/${registeredRun}/base/A`, "refs/termorch/recent/base/A"].sort(),
    );
  });

  it("names an unknown run clearly (exit 2)", async () => {
    const r = await world.cli(["clean", "no-such-run"]);
    expect(r.exitCode).toBe(2);
    expect(r.stderr).toContain('no run "no-such-run"');
  });
});
