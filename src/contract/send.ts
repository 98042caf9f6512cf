import { z } from "zod";
import { SendKeys } from "./keys.js";

/**
 * What a send types into an interactive task's agent, as MCP's `send` and serve's send take it
 * (the CLI's TEXT / --keys say the same): text, pasted as one bracketed paste then Enter, or keys
 * pressed one by one, for a menu (which takes keys and ignores a paste). One of the two.
 */
export const SendAnswer = z.strictObject({
  text: z
    .string()
    .min(1)
    .optional()
    .describe("What to type: pasted as one bracketed paste, then Enter. Give this or `keys`"),
  keys: SendKeys.optional().describe(
    "Keys to press instead of pasting, for a menu (it takes keys and ignores a paste): the `answers` of a task waiting for input name them. Give this or `text`",
  ),
});
export type SendAnswer = z.infer<typeof SendAnswer>;
