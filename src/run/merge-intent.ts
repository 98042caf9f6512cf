import { open, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { MergeIntent } from "../contract/merge-journal.js";
import type { RunContext } from "./context.js";

const FILE = "merge-intent.json";

function fileOf(ctx: Pick<RunContext, "privateDir">): string {
  return join(ctx.privateDir, FILE);
}

/**
 * Records the advance about to happen. Flushed before it returns: the ref is moved right
 * after, and a crash (or power loss) in between must still leave a resume the record.
 */
export async function recordMergeIntent(
  ctx: Pick<RunContext, "privateDir">,
  intent: MergeIntent,
): Promise<void> {
  const file = fileOf(ctx);
  const tmp = `${file}.${process.pid}.tmp`;
  const fh = await open(tmp, "w", 0o600);
  try {
    await fh.writeFile(`${JSON.stringify(MergeIntent.parse(intent), null, 2)}\n`);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
  const dir = await open(ctx.privateDir, "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}

/** The advance an interrupted driver left unfinished, or null. A damaged record is an error: it is never guessed at. */
export async function readMergeIntent(ctx: Pick<RunContext, "privateDir">): Promise<MergeIntent | null> {
  const text = await readFile(fileOf(ctx), "utf8").catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return null;
    throw error;
  });
  if (text === null) return null;
  const parsed = MergeIntent.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${fileOf(ctx)} is not a valid merge record: ${parsed.error.message}`);
  return parsed.data;
}

export async function clearMergeIntent(ctx: Pick<RunContext, "privateDir">): Promise<void> {
  await rm(fileOf(ctx), { force: true });
}
