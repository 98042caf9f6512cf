import { mkdir } from "node:fs/promises";
import { dirname, join } from "node:path";
import type { StopRequest } from "../contract/session-handoff.js";
import type { RunState } from "../contract/state.js";
import { InputError } from "../errors.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { privateDirOf, STOP_FILE } from "../fs/private-dir.js";
import { startedRun } from "./runs.js";

type Env = Readonly<Record<string, string | undefined>>;

/**
 * `termorch stop <run> --at-boundary`: asks the run's driver to start nothing new, let what runs
 * finish, merge nothing, and end with a session handoff (handoff.json) for `termorch resume`.
 * A finished run: InputError (exit 2), nothing written.
 */
export async function requestStop(
  runRef: string,
  by: string,
  opts: { env: Env; cwd: string; now: number },
): Promise<{ state: RunState; file: string }> {
  const { state } = await startedRun(runRef, opts.env, opts.cwd);
  if (state.phase === "reported")
    throw new InputError(
      [
        {
          message: `run ${state.run_id} is finished (exit ${state.exit_code ?? "unknown"}): nothing to stop`,
        },
      ],
      `Its report: ${state.report ?? "none"}`,
    );
  // Past its tasks there is no boundary left: the merge is one step (its approval's wait aside).
  if (state.merge !== null && state.merge.step !== "waiting_approval")
    throw new InputError(
      [
        {
          message: `run ${state.run_id} is merging: its tasks are done, there is no boundary left to stop at`,
        },
      ],
      `It ends on its own; termorch cancel ${state.run_id} ends it now.`,
    );
  const file = join(privateDirOf(state.run_dir, state.run_id), STOP_FILE);
  const request: StopRequest = { at: "boundary", by, requested_at: new Date(opts.now).toISOString() };
  await mkdir(dirname(file), { recursive: true, mode: 0o700 });
  await writeJsonAtomic(file, request, 0o600);
  return { state, file };
}
