/**
 * Reading JSON out of what a CLI printed: whole documents, JSONL streams with other text between
 * the lines, an error object after a stack trace. Pure: text in, values out.
 */

export type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);
export const str = (v: unknown): string | null => (typeof v === "string" ? v : null);

export function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** Every line that is a JSON object, in order (a JSONL stream; other lines are skipped). */
export function jsonLines(text: string): Json[] {
  const out: Json[] = [];
  for (const line of text.split("\n")) {
    const trimmed = line.trim();
    if (!trimmed.startsWith("{")) continue;
    const value = parse(trimmed);
    if (isObject(value)) out.push(value);
  }
  return out;
}

/**
 * The document a CLI printed as its whole output (an array's last object: Qwen Code prints its
 * events as one array), or its last JSON line (anything logged before it is skipped).
 */
export function lastObject(text: string): Json | null {
  const whole = parse(text.trim());
  if (isObject(whole)) return whole;
  if (Array.isArray(whole)) return whole.filter(isObject).at(-1) ?? null;
  const lines = jsonLines(text);
  return lines.at(-1) ?? null;
}

/**
 * The text of the JSON object that starts at `from` (a `{`), found by matching braces outside
 * strings; null when it does not close.
 */
function objectTextAt(text: string, from: number): string | null {
  let depth = 0;
  let inString = false;
  for (let i = from; i < text.length; i++) {
    const c = text[i];
    if (inString) {
      if (c === "\\") i++;
      else if (c === '"') inString = false;
    } else if (c === '"') inString = true;
    else if (c === "{") depth++;
    else if (c === "}" && --depth === 0) return text.slice(from, i + 1);
  }
  return null;
}

/**
 * The last object in a stream of other text that opens a line (after an optional `[ERROR] `)
 * and has an `error` member: gemini 0.61 prints its error object on stderr bare, after a stack
 * trace, where older versions prefixed it with `[ERROR] `.
 */
export function lastErrorObject(text: string): Json | null {
  const starts = [...text.matchAll(/^(?:\[ERROR\] )?\{/gm)].map((m) => m.index + m[0].length - 1);
  for (const at of starts.reverse()) {
    const candidate = objectTextAt(text, at);
    const value = candidate === null ? undefined : parse(candidate);
    if (isObject(value) && "error" in value) return value;
  }
  return null;
}
