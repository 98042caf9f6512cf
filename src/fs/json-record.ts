import { readFile } from "node:fs/promises";
import type { z } from "zod";

/**
 * A JSON file read as `schema`, or null when it is missing, not JSON or not of that shape: for
 * records that may be half-written or foreign, where the caller goes on without them.
 */
export async function readJsonRecord<T>(schema: z.ZodType<T>, path: string): Promise<T | null> {
  try {
    const parsed = schema.safeParse(JSON.parse(await readFile(path, "utf8")));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
