import { readFileSync } from "node:fs";
import { join } from "node:path";
import { StopRequest } from "../contract/session-handoff.js";

/** `<run-dir>/.termorch/<run>`: a run's private files (journal, attempts, records), not its result. */
export function privateDirOf(runDir: string, runId: string): string {
  return join(runDir, ".termorch", runId);
}

/**
 * `<private-dir>/cgroups`: where supervisors record their agents' cgroups while they exist. Kept
 * when the run ends, so that `clean` finds what a killed supervisor left there.
 */
export function cgroupRecordsOf(privateDir: string): string {
  return join(privateDir, "cgroups");
}

/** The file where an attempt's supervisor records its agent's cgroup while it exists. */
export function cgroupRecordOf(privateDir: string, taskId: string, attempt: number): string {
  return join(cgroupRecordsOf(privateDir), `${taskId}.${attempt}`);
}

/**
 * `<private-dir>/finish/<task>`: created by `termorch finish`; the driver (run/interactive.ts)
 * ends that interactive task's agent and counts the task as done.
 */
export function finishFileOf(privateDir: string, taskId: string): string {
  return join(privateDir, "finish", taskId);
}

/**
 * `<private-dir>/approvals/<task>.json` (`integration.json`: the merge's): a person's decision,
 * written by `termorch approve|reject`; the driver takes it when it answers its wait.
 */
export function approvalFileOf(privateDir: string, id: string): string {
  return join(privateDir, "approvals", `${id}.json`);
}

/** `<private-dir>/cancel`: `termorch cancel`'s request. */
export const CANCEL_FILE = "cancel";
/** `<private-dir>/stop`: `termorch stop --at-boundary`'s request (StopRequest); a resume removes it. */
export const STOP_FILE = "stop";

/** The stop at the boundary asked for; null: none (or a file that is not one). */
export function readStopFile(privateDir: string): StopRequest | null {
  try {
    return StopRequest.parse(JSON.parse(readFileSync(join(privateDir, STOP_FILE), "utf8")));
  } catch {
    return null;
  }
}
