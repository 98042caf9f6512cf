import { z } from "zod";

/**
 * `<private-dir>/gates/<name>.json` while a shell gate runs: its process group, and when the
 * group's leader started (ms since the epoch, from /proc; null where unknown), so that a resumed
 * run ends only that gate's processes, never a later process that reused the number.
 */
export const GateRecord = z.object({
  pgid: z.number().int().min(2),
  start: z.number().nullable(),
});
export type GateRecord = z.infer<typeof GateRecord>;
