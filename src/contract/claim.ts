import { z } from "zod";

/** `runs/<id>/claim.json` in a daemon's home: which inbox file a run was taken from, and when. */
export const ClaimRecord = z.object({
  /** The inbox file's path; its folder is what the assignments' `workspace_dir` is relative to. */
  source: z.string().min(1),
  claimed_at: z.string(),
  pid: z.number().int(),
});
export type ClaimRecord = z.infer<typeof ClaimRecord>;
