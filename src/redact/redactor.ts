/**
 * Secret redaction for everything termorch writes (logs, status files, report, ledger).
 * The same pattern sources feed the in-pane wrapper (Perl), so they are kept to the syntax
 * both engines share; a leading `(?i)` is Perl's inline flag, turned into the `i` flag here.
 */

export const REDACTED = "[REDACTED]";

/** Common token formats, redacted whatever variable (or file) they come from. */
export const TOKEN_PATTERNS: readonly string[] = [
  "(?i)bearer\\s+[a-z0-9._~+/-]{8,}=*",
  "gh[pousr]_[A-Za-z0-9]{30,}",
  "github_pat_[A-Za-z0-9_]{30,}",
  "sk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",
  "AKIA[0-9A-Z]{16}",
  "xox[abposr]-[A-Za-z0-9-]{10,}",
  "glpat-[A-Za-z0-9_-]{20,}",
  "AIza[0-9A-Za-z_-]{35}",
  "eyJ[A-Za-z0-9_-]{8,}\\.eyJ[A-Za-z0-9_-]{8,}\\.[A-Za-z0-9_-]{8,}",
  "-----BEGIN [A-Z ]*PRIVATE KEY-----[\\s\\S]*?-----END [A-Z ]*PRIVATE KEY-----",
];

/** Values shorter than this are not redacted literally: "1" would blank every digit. */
const MIN_SECRET_LENGTH = 4;

/** Escapes a literal for use inside a regex in both JavaScript and Perl. */
function escapeRegex(literal: string): string {
  // Line breaks become \x{..} because the wrapper reads one pattern per line.
  return literal.replace(/[.*+?^${}()|[\]\\\r\n]/g, (c) =>
    c === "\n" || c === "\r" ? `\\x{${c.codePointAt(0)!.toString(16)}}` : `\\${c}`,
  );
}

/** Characters that no common JSON or URL encoder rewrites: they stand for themselves in every form. */
const PLAIN = /^[A-Za-z0-9_.-]$/;

const JSON_SHORT: Readonly<Record<string, string>> = {
  '"': '\\"',
  "\\": "\\\\",
  "/": "\\/",
  "\b": "\\b",
  "\f": "\\f",
  "\n": "\\n",
  "\r": "\\r",
  "\t": "\\t",
};

/** Hex digits in a pattern that matches them in either case (`%c3` and `%C3`, `\u00e9` and `\u00E9`). */
function anyCaseHex(n: number, width: number): string {
  return n
    .toString(16)
    .padStart(width, "0")
    .replace(/[a-f]/g, (d) => `[${d}${d.toUpperCase()}]`);
}

/**
 * Every spelling of one character that an agent printing the secret may produce: itself, its
 * JSON escapes (JSON.stringify, Python's json.dumps with and without ensure_ascii, `\/` of PHP,
 * `\u00XX` of encoders that escape more), its percent-encoding (encodeURIComponent, quote_plus,
 * form encoding's `+` for a space) and, for a non-ASCII character, its UTF-8 bytes as single
 * characters: how they look to the byte-exact (latin1) redaction of artifacts and patches, and
 * what the in-pane wrapper, which works on bytes, sees anyway.
 */
function characterForms(ch: string): string {
  // Escaped all the same: "." is plain in every encoding but any character in a regex.
  if (PLAIN.test(ch)) return escapeRegex(ch);
  const bytes = [...Buffer.from(ch, "utf8")];
  const forms = new Set<string>([escapeRegex(ch)]);
  const short = JSON_SHORT[ch];
  if (short !== undefined) forms.add(escapeRegex(short));
  let units = "";
  for (let i = 0; i < ch.length; i++) units += `\\\\u${anyCaseHex(ch.charCodeAt(i), 4)}`;
  forms.add(units);
  forms.add(bytes.map((b) => `%${anyCaseHex(b, 2)}`).join(""));
  if (ch === " ") forms.add("\\+");
  if (bytes.length > 1) forms.add(bytes.map((b) => `\\x{${b.toString(16)}}`).join(""));
  // Longest first: JSON's two-character "\\\\" must win over a raw backslash, or half an escape stays behind.
  return `(?:${[...forms].sort((a, b) => b.length - a.length).join("|")})`;
}

/**
 * The pattern for one secret value: the value in any of the encodings above (one alternation per
 * character, so the pattern stays one pass however many forms there are; a run of plain
 * characters stays a literal that both engines search for quickly).
 */
function secretPattern(value: string): string {
  let out = "";
  for (const ch of value) out += characterForms(ch);
  return out;
}

export function isSecretName(
  name: string,
  fragments: readonly string[],
  explicit: readonly string[] = [],
): boolean {
  if (explicit.includes(name)) return true;
  const upper = name.toUpperCase();
  return fragments.some((f) => upper.includes(f.toUpperCase()));
}

export class Redactor {
  private readonly regexes: RegExp[];

  /** @param sources pattern sources (see module comment); invalid ones throw with the pattern named. */
  constructor(readonly sources: readonly string[]) {
    this.regexes = sources.map(compile);
  }

  /** A redactor for the token formats, configured patterns and the given secret values. */
  static from(patterns: readonly string[], secretValues: Iterable<string>): Redactor {
    const literals = [...new Set([...secretValues].filter((v) => v.length >= MIN_SECRET_LENGTH))]
      // Longest first, so a secret containing another is removed whole.
      .sort((a, b) => b.length - a.length)
      .map(secretPattern);
    return new Redactor([...literals, ...TOKEN_PATTERNS, ...patterns]);
  }

  redact(text: string): string {
    let out = text;
    for (const re of this.regexes) out = out.replace(re, REDACTED);
    return out;
  }

  /** Redacts every string inside a JSON-able value. */
  redactDeep<T>(value: T): T {
    if (typeof value === "string") return this.redact(value) as T;
    if (Array.isArray(value)) return value.map((v) => this.redactDeep(v)) as T;
    if (value && typeof value === "object") {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = this.redactDeep(v);
      return out as T;
    }
    return value;
  }
}

/** Compiles one pattern source; exported so config validation can report a bad pattern. */
export function compile(source: string): RegExp {
  let flags = "gu";
  let body = source;
  if (body.startsWith("(?i)")) {
    flags += "i";
    body = body.slice(4);
  }
  // Perl's \x{..} escape is JavaScript's \u{..} under the u flag.
  body = body.replace(/\\x\{([0-9a-fA-F]+)\}/g, "\\u{$1}");
  return new RegExp(body, flags);
}
