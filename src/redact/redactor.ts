/**
 * Secret redaction for everything termorch writes (logs, status files, artifacts, patches, the
 * report, the ledger, the CLI's and daemon's logs). The rules are src/redact/RULES.md, and the
 * pane supervisor (src/tmux/supervisor.pl) applies the same ones with Perl; the corpus in
 * test/corpus/redaction.json runs through both. Pattern sources are kept to the syntax both
 * engines share; `compile` below is the one bridge between the dialects.
 */

export const REDACTED = "[REDACTED]";

/** A partial line longer than this (bytes) is redacted and written without waiting for its end. */
export const LINE_MAX = 1024 * 1024;

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
  // A key on one line; a key over several lines is the block rule (RULES.md).
  "-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
];

/** Values shorter than this are not redacted literally: "1" would blank every digit. */
const MIN_SECRET_LENGTH = 4;

/** Escapes a literal for use inside a regex in both JavaScript and Perl. */
function escapeRegex(literal: string): string {
  // Line breaks become \x{..} because the supervisor reads one pattern per line.
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
 * what the pane supervisor, which works on bytes, sees anyway.
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

/**
 * The pattern sources of secret values alone (no token formats, no configured patterns): a value
 * with line breaks whole and line by line, values shorter than MIN_SECRET_LENGTH left out.
 */
export function secretSources(secretValues: Iterable<string>): string[] {
  const values = [...secretValues].flatMap((v) => [v, ...v.split(/\r\n|\r|\n/)]);
  return (
    [...new Set(values.filter((v) => v.length >= MIN_SECRET_LENGTH))]
      // Longest first, so a secret containing another is removed whole.
      .sort((a, b) => b.length - a.length)
      .map(secretPattern)
  );
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

/** A stream's private-key block state, carried from one piece of it to the next (RULES.md). */
export interface LineState {
  inKey: boolean;
}

interface Pattern {
  re: RegExp;
  /** The same pattern over a whole chunk of lines: if it does not match there, no line matches. */
  pre: RegExp | null;
}

const KEY_BEGIN = /-----BEGIN [A-Z ]*PRIVATE KEY-----/;
const KEY_BEGIN_TO_END = /-----BEGIN [A-Z ]*PRIVATE KEY-----[^\n]*?-----END [A-Z ]*PRIVATE KEY-----/;
const KEY_BEGIN_ON = /-----BEGIN [A-Z ]*PRIVATE KEY-----[^\n]*/;
const TO_KEY_END = /^[^\n]*?-----END [A-Z ]*PRIVATE KEY-----/;
/** Patterns whose match in a chunk of lines does not follow from a match in one line alone. */
const NO_PREFILTER = /\\[AzZG]|\(\?<?!|\(\?\^?[a-z]*s|\(\*/;

export class Redactor {
  private readonly chars: Pattern[];
  private bytes: Pattern[] | null = null;

  /** @param sources pattern sources (see module comment); invalid ones throw with the pattern named. */
  constructor(readonly sources: readonly string[]) {
    this.chars = sources.filter((s) => s !== "").map((s) => pattern(s, false));
  }

  /**
   * A redactor for the token formats, configured patterns and the given secret values. A value
   * with line breaks is matched whole (its JSON or URL encodings are one line) and line by line.
   */
  static from(patterns: readonly string[], secretValues: Iterable<string>): Redactor {
    return new Redactor([...secretSources(secretValues), ...TOKEN_PATTERNS, ...patterns]);
  }

  /**
   * Whether `data` holds a secret this redactor matches (in any encoding it knows), judged as
   * bytes, line by line, as redaction would.
   */
  finds(data: Buffer): boolean {
    return this.redactBytes(data) !== data;
  }

  /** Redacts a text (a message, a JSON string value): its lines, with a fresh key state. */
  redact(text: string): string {
    return this.redactLines(text, { inKey: false }, false);
  }

  /** Redacts bytes as the supervisor does (a file, a patch): line by line, byte for byte. */
  redactBytes(data: Buffer, state: LineState = { inKey: false }): Buffer {
    const text = data.toString("latin1");
    const out = this.redactLines(text, state, true);
    return out === text ? data : Buffer.from(out, "latin1");
  }

  /**
   * The rules of RULES.md over whole lines (a partial line flushed at LINE_MAX counts as one).
   * `bytes`: the text is latin1 (one character per byte) and the patterns run over bytes.
   */
  redactLines(text: string, state: LineState, bytes: boolean): string {
    if (bytes) this.bytes ??= this.sources.filter((s) => s !== "").map((s) => pattern(s, true));
    const patterns = bytes ? (this.bytes ?? []) : this.chars;
    if (patterns.length === 0) return text;
    let out = text;
    if (state.inKey || out.includes("PRIVATE KEY-----")) out = mapLines(out, (line) => keyBlock(line, state));
    for (const p of patterns) {
      if (p.pre && !p.pre.test(out)) continue;
      const re = p.re;
      // An empty match hides nothing: it is replaced by nothing, not by a marker.
      out = mapLines(out, (line) => line.replace(re, (m) => (m === "" ? "" : REDACTED)));
    }
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

/**
 * Applies `fn` to each line of `text` without its "\n", which is kept. Text after the last "\n"
 * is a line only if it is not empty (as Perl's split sees it).
 */
function mapLines(text: string, fn: (line: string) => string): string {
  const lines = text.split("\n");
  const last = lines.length - 1;
  return lines.map((line, i) => (i === last && line === "" ? line : fn(line))).join("\n");
}

/** One line through the private-key block rule. */
function keyBlock(line: string, state: LineState): string {
  if (state.inKey) {
    const end = TO_KEY_END.exec(line);
    if (!end) return REDACTED;
    state.inKey = false;
    return REDACTED + line.slice(end[0].length);
  }
  if (KEY_BEGIN.test(line) && !KEY_BEGIN_TO_END.test(line)) {
    state.inKey = true;
    return line.replace(KEY_BEGIN_ON, REDACTED);
  }
  return line;
}

function pattern(source: string, bytes: boolean): Pattern {
  const re = compile(bytes ? Buffer.from(source, "utf8").toString("latin1") : source);
  const pre = NO_PREFILTER.test(source) ? null : new RegExp(re.source, `${re.flags.replace("g", "")}m`);
  return { re, pre };
}

/**
 * Compiles one pattern source; exported so config validation can report a bad pattern. The one
 * bridge between Perl's dialect and JavaScript's: a leading `(?i)` is the `i` flag, `\x{..}` is
 * `\u{..}`, and `s` makes `.` what it is in Perl within a line (anything; lines hold no "\n").
 */
export function compile(source: string): RegExp {
  let flags = "gsu";
  let body = source;
  if (body.startsWith("(?i)")) {
    flags += "i";
    body = body.slice(4);
  }
  body = body.replace(/\\x\{([0-9a-fA-F]+)\}/g, "\\u{$1}");
  return new RegExp(body, flags);
}
