import { closeSync, lstatSync, openSync, readlinkSync, readSync } from "node:fs";
import type { Gate } from "../contract/report.js";
import type { Ports } from "./ports.js";

/** Bytes read at a time from a changed file; a secret cut at a chunk's end is caught by the overlap. */
const CHUNK = 8 * 1024 * 1024;
/** Names of the places shown in the gate's detail at most. */
const MAX_NAMED = 10;

/** The secrets gate and where it found a secret's value (redacted names, never the value). */
export interface SecretsFound {
  gate: Gate;
  places: string[];
}

/**
 * The secrets gate, run before termorch commits a task's work: a secret value the run passed to
 * its agents (an environment variable whose name looks secret, in any encoding redaction knows)
 * in the content or name of a changed file that would be committed (not the handoff nor a CLI's
 * scratch file, unless the agent committed it), in a message of a commit the agent made, or in
 * the name of the branch it checked out, fails the
 * task (reason `validation`) instead of being committed on its branch and merged into the user's.
 * Logs and artifacts are redacted; a repository cannot be (DESIGN.md §10, docs/guides/how-tasks-run.md: secrets).
 * Token formats and configured patterns do not count here: a repository may well hold
 * look-alikes (test fixtures), but never the value of a secret the run handed out.
 * Returns null when the run has no secrets (nothing to look for).
 */
export async function secretsGate(
  ports: Pick<Ports, "secretFinder" | "workspace" | "redactor">,
  worktree: string,
  start: string,
  exclude: readonly string[],
  scratch: readonly string[],
): Promise<SecretsFound | null> {
  const finder = ports.secretFinder;
  if (!finder) return null;
  // What would be committed only: the handoff (and a CLI's scratch files) left in the worktree
  // never is, and its kept copy is redacted, so a secret quoted there does not fail the task.
  const { paths, messages, head, committed } = await ports.workspace.pendingChanges(
    worktree,
    start,
    exclude,
    scratch,
  );
  const found: string[] = [];
  for (const path of paths) {
    const shown = ports.redactor.redact(path.toString("utf8"));
    if (finder.finds(path)) found.push(`${shown} (its name)`);
    else if (holdsSecret(worktree, path, (b) => finder.finds(b))) found.push(shown);
  }
  // ... unless the agent committed such a file itself: then it is in its branch, as committed.
  for (const { path, content } of committed) {
    const shown = ports.redactor.redact(path.toString("utf8"));
    if (finder.finds(path)) found.push(`${shown} (its name)`);
    else if (content && finder.finds(content)) found.push(`${shown} (as the agent committed it)`);
  }
  if (finder.finds(messages)) found.push("a commit message of the agent's");
  // Its name would be recorded (state.json) and reported as a ref the agent created.
  if (finder.finds(head)) found.push("the name of the branch it checked out");
  if (found.length === 0)
    return {
      gate: { name: "secrets", required: true, passed: true, detail: "no secret value in its changes" },
      places: [],
    };
  const named =
    found.slice(0, MAX_NAMED).join(", ") +
    (found.length > MAX_NAMED ? ` and ${found.length - MAX_NAMED} more` : "");
  return {
    gate: {
      name: "secrets",
      required: true,
      passed: false,
      detail: `its changes hold the value of a secret environment variable, in: ${named}; nothing was committed (remove the secret from the task's output, or stop passing it to the agent)`,
    },
    places: found,
  };
}

/**
 * Whether a changed file holds a secret: a regular file's content, or a symbolic link's target
 * (git commits the target path, not what it points at).
 */
function holdsSecret(worktree: string, raw: Buffer, finds: (b: Buffer) => boolean): boolean {
  // The name as bytes: a file name that is not UTF-8 is still read.
  const path = Buffer.concat([Buffer.from(`${worktree}/`), raw]);
  const info = lstatSync(path, { throwIfNoEntry: false });
  if (info?.isSymbolicLink()) return finds(readlinkSync(path, { encoding: "buffer" }));
  if (!info?.isFile()) return false;
  const fd = openSync(path, "r");
  try {
    const buf = Buffer.alloc(Math.min(CHUNK, info.size) + OVERLAP);
    let carry = 0;
    for (;;) {
      const n = readSync(fd, buf, carry, buf.length - carry, null);
      // The carried tail was looked at with the chunk before.
      if (n <= 0) return false;
      const end = carry + n;
      if (finds(buf.subarray(0, end))) return true;
      // The chunk's tail goes on with the next one: a secret across the cut is seen whole.
      carry = Math.min(OVERLAP, end);
      buf.copy(buf, 0, end - carry, end);
    }
  } finally {
    closeSync(fd);
  }
}

/** Longer than any secret's longest encoding (a character is at most 12 bytes in any of them). */
const OVERLAP = 64 * 1024;
