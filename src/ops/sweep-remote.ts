import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { registeredRuns } from "../fs/registry.js";
import { deleteRemoteRefs, remoteRuns, shownRemote } from "../git/remote.js";

type Env = Readonly<Record<string, string | undefined>>;

/** What `termorch clean --remote URL --older-than AGE` did to each run it found there. */
export interface SweepReport {
  remote: string;
  removed: { runId: string; refs: number; newest: string }[];
  kept: { runId: string; why: string }[];
}

/**
 * Deletes, on a scale-out git remote, the refs of runs that no longer exist anywhere this host
 * knows of: not in its registry, and with no commit newer than `olderThanMs` (a coordinator on
 * another host may still drive a recent one). A run registered here is `termorch clean <run>`'s.
 */
export async function sweepRemote(
  remote: string,
  olderThanMs: number,
  env: Env,
  now = Date.now(),
): Promise<SweepReport> {
  const report: SweepReport = { remote: shownRemote(remote), removed: [], kept: [] };
  const scratch = await mkdtemp(join(env.TMPDIR || tmpdir(), "termorch-sweep-"));
  try {
    const runs = await remoteRuns(remote, scratch);
    const registered = new Set((await registeredRuns(env)).map((e) => e.run_id));
    for (const [runId, run] of [...runs].sort(([a], [b]) => a.localeCompare(b))) {
      const newest = new Date(run.newestMs).toISOString();
      if (registered.has(runId))
        report.kept.push({ runId, why: `registered here: termorch clean ${runId} cleans it` });
      else if (now - run.newestMs < olderThanMs)
        report.kept.push({ runId, why: `its newest commit is from ${newest}, not older than asked` });
      else if (await deleteRemoteRefs(scratch, remote, run.refs))
        report.removed.push({ runId, refs: run.refs.length, newest });
      else report.kept.push({ runId, why: "the remote refused to delete its refs" });
    }
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
  return report;
}

/** An age as `--older-than` takes it (`90m`, `12h`, `7d`, `30s`), in ms; null when it is not one. */
export function ageMs(text: string): number | null {
  const m = /^(\d+)([smhd])$/.exec(text);
  if (!m) return null;
  const unit = { s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2] as "s" | "m" | "h" | "d"];
  return Number(m[1]) * unit;
}
