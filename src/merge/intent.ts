import { open, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { MergeIntent } from "../contract/merge-journal.js";
import type { RunPlan } from "../task/run-plan.js";

const FILE = "merge-intent.json";

function fileOf(run: Pick<RunPlan, "privateDir">): string {
  return join(run.privateDir, FILE);
}

/**
 * Records the advance about to happen. Flushed before it returns: the ref is moved right
 * after, and a crash (or power loss) in between must still leave a resume the record.
 */
export async function recordMergeIntent(
  run: Pick<RunPlan, "privateDir">,
  intent: MergeIntent,
): Promise<void> {
  const file = fileOf(run);
  const tmp = `${file}.${process.pid}.tmp`;
  const fh = await open(tmp, "w", 0o600);
  try {
    await fh.writeFile(`${JSON.stringify(MergeIntent.parse(intent), null, 2)}\n`);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
  const dir = await open(run.privateDir, "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

/** The advance an interrupted driver left unfinished, or null. A damaged record is an error: it is never guessed at. */
export async function readMergeIntent(run: Pick<RunPlan, "privateDir">): Promise<MergeIntent | null> {
  const text = await readFile(fileOf(run), "utf8").catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return null;
    throw error;
  });
  if (text === null) return null;
  const parsed = MergeIntent.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${fileOf(run)} is not a valid merge record: ${parsed.error.message}`);
  return parsed.data;
}

export async function clearMergeIntent(run: Pick<RunPlan, "privateDir">): Promise<void> {
  await rm(fileOf(run), { force: true });
}
