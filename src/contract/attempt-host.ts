import { z } from "zod";

/** Which worker and host ran an attempt of a task (scale-out), and where to attach to it. */
export const AttemptHost = z.strictObject({
  attempt: z.number().int().positive(),
  worker: z.string(),
  host: z.string(),
  /** The worker's tmux socket path on that host. */
  socket: z.string(),
});
export type AttemptHost = z.infer<typeof AttemptHost>;
