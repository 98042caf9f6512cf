/**
 * What a `termorch plan` killed before its end leaves, found by the pid its planning's id carries
 * (`plan-<t>-<pid>`): its planner at work in its tmux session, and the copy of the repository in
 * its session folder. The next `termorch plan` and `termorch clean` end and remove them; a planning
 * whose process lives is never touched.
 */
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ensureUserDir } from "../fs/names.js";
import { pidAlive } from "../fs/proc.js";
import { PLANNER } from "../task/task-plan.js";

/** A planning's own name: its staging files, its session folder and its planner's session carry it. */
export function planIdOf(startedAt: number, pid: number): string {
  return `plan-${startedAt.toString(36)}-${pid}`;
}

/** Where planning sessions keep their prompts, logs, ledger and copy: the per-user folder's plans/. */
export async function plansDirOf(): Promise<string> {
  return join(await ensureUserDir(), "plans");
}

/** The pid of the `termorch plan` a planning id names; null: not a planning id. */
export function pidOfPlanId(id: string): number | null {
  const m = /^plan-[0-9a-z]+-(\d+)$/.exec(id);
  return m ? Number(m[1]) : null;
}

/** A planner's session: `termorch-<plan id>-_review-planner` (reviewSession). */
const PLANNER_SESSION = new RegExp(`^termorch-(plan-[0-9a-z]+-\\d+)-_review-${PLANNER}$`);

/** Of the sessions named, the planners whose `termorch plan` is gone: they plan for no one. */
export function deadPlanners(sessions: Iterable<string>): string[] {
  return [...sessions].filter((session) => {
    const id = PLANNER_SESSION.exec(session)?.[1];
    return id !== undefined && gone(id);
  });
}

/** Removes the copies of the repository that dead plannings left in `plansDir`; answers their folders. */
export function removeDeadCopies(plansDir: string): string[] {
  let ids: string[];
  try {
    ids = readdirSync(plansDir);
  } catch {
    return [];
  }
  const removed: string[] = [];
  for (const id of ids.filter(gone)) {
    const copy = join(plansDir, id, "copy");
    try {
      if (readdirSync(copy).length === 0) continue;
    } catch {
      continue;
    }
    rmSync(copy, { recursive: true, force: true });
    removed.push(join(plansDir, id));
  }
  return removed;
}

/** A planning whose `termorch plan` is no longer running. */
function gone(id: string): boolean {
  const pid = pidOfPlanId(id);
  return pid !== null && !pidAlive(pid);
}
