import { z } from "zod";

/**
 * Where termorch learned an interactive agent's state (prompt accepted, waiting for input or a
 * permission, turn finished): its CLI's own hooks or events, or its screen matched against the
 * preset's patterns, the fallback for a CLI without them.
 */
export const StateSource = z.enum(["hooks", "screen"]);
export type StateSource = z.infer<typeof StateSource>;
