import { constants } from "node:fs";
import { mkdir, open, readFile, rename, rmdir } from "node:fs/promises";
import { basename, extname, join } from "node:path";
import { z } from "zod";
import { RUN_ID_PATTERN } from "../contract/assignments.js";
import { ClaimRecord } from "../contract/claim.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { jsonText, readRegularFile } from "../input/json-file.js";

/** A file taken from the inbox: it now lives at `runs/<runId>/assignments.json`. */
export interface Claim {
  runId: string;
  runDir: string;
  file: string;
  /** The inbox file it came from (its folder is what `workspace_dir` is relative to). */
  source: string;
}

/** Names a daemon never takes: dotfiles and the usual temporary names of writers. */
export function isCandidate(name: string): boolean {
  return (
    name.endsWith(".json") &&
    !name.startsWith(".") &&
    !/\.(tmp|part|partial|swp)\.json$/.test(name) &&
    !name.includes("~")
  );
}

/** Just the field the daemon names the run folder by; the run validates the whole file later. */
const WithRunId = z.object({ run_id: z.string().regex(RUN_ID_PATTERN) });

/** run_id from the file when it has a usable one, else its base name. */
export async function runIdFor(path: string): Promise<string> {
  try {
    const text = jsonText(await readRegularFile(path));
    const parsed = typeof text === "string" ? WithRunId.safeParse(JSON.parse(text)) : null;
    if (parsed?.success) return parsed.data.run_id;
  } catch {}
  const base = basename(path, extname(path))
    .replace(/[^A-Za-z0-9_-]/g, "_")
    .replace(/^[_-]+/, "")
    .slice(0, 56);
  return base || "run";
}

/**
 * Takes an inbox file exactly once, even with several daemons on one home: the run folder is
 * reserved with mkdir (a clash gets the next suffix, never an overwrite), then the file is moved
 * in with rename; if another daemon moved it first, the reservation is given back.
 */
export async function claim(path: string, runsDir: string): Promise<Claim | null> {
  const wanted = await runIdFor(path);
  for (let n = 1; n < 1000; n++) {
    const suffix = n === 1 ? "" : `-${n}`;
    const runId = `${wanted.slice(0, 64 - suffix.length)}${suffix}`;
    const runDir = join(runsDir, runId);
    try {
      await mkdir(runDir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "EEXIST") continue;
      throw error;
    }
    const file = join(runDir, "assignments.json");
    try {
      await rename(path, file);
    } catch (error) {
      await rmdir(runDir).catch(() => {});
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw error;
    }
    await makeOwnerOnly(file);
    const record: ClaimRecord = { source: path, claimed_at: new Date().toISOString(), pid: process.pid };
    await writeJsonAtomic(join(runDir, "claim.json"), record);
    return { runId, runDir, file, source: path };
  }
  throw new Error(`no free run folder for ${wanted} under ${runsDir}`);
}

/**
 * A claimed file may name secrets (env_vars) and was dropped with whatever mode its writer gave
 * it: in the run folder it is termorch's, owner-only like the run's logs. Only a regular file is
 * changed, through a handle opened without following links: what was dropped may be a link to
 * /dev/null or to someone's file, whose mode is not termorch's to change. A file another user
 * owns keeps its mode (the chmod is refused).
 */
async function makeOwnerOnly(file: string): Promise<void> {
  const handle = await open(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK).catch(
    () => null,
  );
  if (!handle) return;
  try {
    if ((await handle.stat()).isFile()) await handle.chmod(0o600);
  } catch {
  } finally {
    await handle.close();
  }
}

/** A run folder's claim.json; a problem (unreadable, not JSON, not a claim) as text instead. */
export async function readClaim(runDir: string): Promise<ClaimRecord | { problem: string }> {
  const path = join(runDir, "claim.json");
  try {
    const parsed = ClaimRecord.safeParse(JSON.parse(await readFile(path, "utf8")));
    if (parsed.success) return parsed.data;
    const issue = parsed.error.issues[0];
    return {
      problem: `${path}: field ${issue?.path.join(".") || "(root)"}: ${issue?.message ?? "not a claim record"}`,
    };
  } catch (error) {
    return { problem: `${path}: ${error instanceof Error ? error.message : String(error)}` };
  }
}
