import { z } from "zod";

/**
 * Keys `termorch send --keys` presses in an interactive task's terminal (docs/guides/interactive.md).
 * A menu takes keys, not a paste: codex ignores a bracketed paste in its selection lists,
 * so a pasted "2" and Enter confirm whatever option is highlighted. Only tmux's names of the keys
 * a question is answered with, and single printable ASCII characters (a digit or a letter a menu
 * takes as its choice): tmux types any other name as its letters.
 */

/** The named keys, as tmux names them. */
export const KEY_NAMES = [
  "Enter",
  "Escape",
  "Tab",
  "BTab",
  "Space",
  "BSpace",
  "Up",
  "Down",
  "Left",
  "Right",
  "Home",
  "End",
  "PageUp",
  "PageDown",
  "Delete",
] as const;

/** Names people write for a key tmux names otherwise (tmux would type "Esc" as three letters). */
const ALIASES: Readonly<Record<string, (typeof KEY_NAMES)[number]>> = { Esc: "Escape" };

/** The most keys one send presses: enough for any menu, and a bound on how long a send takes. */
export const MAX_KEYS = 32;

const KEY_PATTERN = new RegExp(`^(${[...KEY_NAMES, ...Object.keys(ALIASES)].join("|")}|[!-~])$`);

const KEY_RULE = `a key is one of ${KEY_NAMES.join(", ")} (Esc for Escape), or one printable ASCII character (a digit, a letter; Space for a space)`;

/** Why `key` is not a key termorch presses, or null when it is. */
export function keyProblem(key: string): string | null {
  if (KEY_PATTERN.test(key)) return null;
  const lower = key.toLowerCase();
  const near = [...KEY_NAMES, ...Object.keys(ALIASES)].find((n) => n.toLowerCase() === lower);
  return `"${key}" is not a key termorch sends${near ? ` (did you mean "${near}"?)` : ""}: ${KEY_RULE}`;
}

/** What is wrong with a list of keys to press, one message each; empty when nothing is. */
export function keysProblems(keys: readonly string[]): string[] {
  if (keys.length === 0) return ["no key given"];
  if (keys.length > MAX_KEYS) return [`${keys.length} keys given: at most ${MAX_KEYS} a send`];
  return keys.flatMap((key, i) => {
    const problem = keyProblem(key);
    return problem === null ? [] : [`key ${i + 1}: ${problem}`];
  });
}

export const SendKey = z
  .string()
  .regex(KEY_PATTERN, { error: (issue) => keyProblem(String(issue.input)) ?? "not a key" })
  .describe(
    `A key to press: ${KEY_NAMES.join(", ")} (Esc for Escape), or one printable ASCII character typed as it is (a digit or a letter a menu takes as its choice)`,
  );

export const SendKeys = z
  .array(SendKey)
  .min(1)
  .max(MAX_KEYS)
  .describe(
    "Keys pressed one after the other in the agent's terminal (tmux send-keys, each once the screen took the one before), not pasted: for a menu or a question that takes keys",
  );

/** How tmux is told to press a key: by its name, or as a character typed as it is (`send-keys -l`). */
export function tmuxKeyOf(key: string): { name: string } | { literal: string } {
  const problem = keyProblem(key);
  if (problem !== null) throw new Error(problem);
  if (key.length === 1) return { literal: key };
  return { name: ALIASES[key] ?? key };
}

/** The keys that answer a known question of an agent's CLI, and which of its answers they pick. */
export const KeyAnswer = z.strictObject({
  keys: z.array(SendKey).min(1),
  picks: z
    .string()
    .describe("The answer as the CLI shows it (`2. Use existing model`), and what taking it does"),
});
export type KeyAnswer = z.infer<typeof KeyAnswer>;
