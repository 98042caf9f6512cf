import { z } from "zod";

/** Which worker and host ran an attempt of a task (scale-out), and where to attach to it. */
export const AttemptHost = z.strictObject({
  attempt: z.number().int().positive(),
  worker: z.string(),
  host: z.string(),
  /** The worker's tmux socket path on that host. */
  socket: z.string(),
  /**
   * Which of the job's deliveries, and which of the worker's attempts in it, this was (its
   * progress names them): a coordinator resumed while it runs knows it already. Absent when
   * learned only from the job's result.
   */
  delivery: z.number().int().min(0).optional(),
  worker_attempt: z.number().int().min(0).optional(),
});
export type AttemptHost = z.infer<typeof AttemptHost>;
