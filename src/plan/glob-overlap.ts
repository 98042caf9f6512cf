/**
 * Whether two `allowed_paths` entries can name the same file: a path both match, as the
 * allowed_paths gate matches (fs/find-files.ts `matchesAny`: the glob itself, or anything below
 * it, dotfiles included). Pure. Decided exactly for `*`, `?`, `**`, character classes (`[a-z]`,
 * `[!x]`), braces and escapes; a glob with anything else (extglobs, a leading `!`) is taken to
 * overlap with every other, so a prediction never misses a collision it cannot read.
 */

/** One character a segment's pattern matches: a set of characters, or any but `/`. */
type CharSet =
  | { kind: "any" }
  | { kind: "set"; chars: ReadonlySet<string>; ranges: readonly [string, string][]; negated: boolean };

/** One item of a segment's pattern. */
type Item = { kind: "star" } | { kind: "char"; set: CharSet };

/** A segment: `**` (any number of segments), or a pattern within one segment. */
type Segment = { kind: "globstar" } | { kind: "pattern"; items: readonly Item[] };

/** At most this many alternatives a glob's braces expand to; past it, the glob is unreadable. */
const MAX_ALTERNATIVES = 64;

/** Whether some path matches both globs (or lies below what both match). */
export function globsOverlap(a: string, b: string): boolean {
  const left = parseGlob(a);
  const right = parseGlob(b);
  if (left === null || right === null) return true;
  // Anything below a match matches too: both get a trailing `**`.
  const globstar: Segment = { kind: "globstar" };
  return left.some((l) => right.some((r) => pathsMeet([...l, globstar], [...r, globstar])));
}

/** The segments of each alternative of a glob; null: it uses what is not read here. */
export function parseGlob(glob: string): Segment[][] | null {
  if (glob.startsWith("!") || /[@!+?*]\(/.test(glob)) return null;
  const braced = expandBraces(glob.replace(/^\.\//, "").replace(/\/+$/, ""));
  if (braced === null) return null;
  const alternatives = braced.flatMap(literalClasses);
  if (alternatives.length > MAX_ALTERNATIVES) return null;
  const out: Segment[][] = [];
  for (const alt of alternatives) {
    const segments: Segment[] = [];
    for (const part of alt.split("/")) {
      if (part === "" || part === ".") continue;
      if (part === "**") {
        if (segments.at(-1)?.kind !== "globstar") segments.push({ kind: "globstar" });
        continue;
      }
      const items = parseSegment(part);
      if (items === null) return null;
      segments.push({ kind: "pattern", items });
    }
    out.push(segments);
  }
  return out;
}

/**
 * picomatch lets a character class match its own text too (`x[ab]y` matches `x[ab]y`): each class
 * of the glob as itself, and as that text escaped.
 */
function literalClasses(glob: string): string[] {
  const at = firstClass(glob);
  if (at === null) return [glob];
  const [open, close] = at;
  const escaped = glob.slice(open, close + 1).replace(/[[\]\\*?{}!^-]/g, (c) => `\\${c}`);
  return literalClasses(glob.slice(close + 1)).flatMap((rest) => [
    glob.slice(0, close + 1) + rest,
    glob.slice(0, open) + escaped + rest,
  ]);
}

/** Where the first character class is (`[` to its `]`); null: none. */
function firstClass(glob: string): [number, number] | null {
  for (let i = 0; i < glob.length; i++) {
    if (glob[i] === "\\") i++;
    else if (glob[i] === "[") {
      const close = glob.indexOf("]", i + 2);
      if (close > 0) return [i, close];
    }
  }
  return null;
}

/** `{a,b}` alternatives, nested; null: unbalanced, a range (`{1..3}`), or too many. */
function expandBraces(glob: string): string[] | null {
  let depth = 0;
  let open = -1;
  for (let i = 0; i < glob.length; i++) {
    const c = glob[i];
    if (c === "\\") {
      i++;
      continue;
    }
    if (c === "[") {
      const close = glob.indexOf("]", i + 2);
      if (close > 0) i = close;
      continue;
    }
    if (c === "{") {
      if (depth === 0) open = i;
      depth++;
    } else if (c === "}" && depth > 0) {
      depth--;
      if (depth === 0) {
        const inner = glob.slice(open + 1, i);
        if (inner.includes("..")) return null;
        const parts = splitTop(inner);
        if (parts.length < 2) return null;
        const rest = glob.slice(i + 1);
        const out: string[] = [];
        for (const part of parts) {
          const expanded = expandBraces(glob.slice(0, open) + part + rest);
          if (expanded === null) return null;
          out.push(...expanded);
          if (out.length > MAX_ALTERNATIVES) return null;
        }
        return out;
      }
    }
  }
  return depth === 0 ? [glob] : null;
}

/** `a,{b,c},d` split at its top-level commas. */
function splitTop(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\\") i++;
    else if (c === "{") depth++;
    else if (c === "}") depth--;
    else if (c === "," && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

/** A segment's pattern as items; null: a class it cannot read. */
function parseSegment(part: string): Item[] | null {
  const items: Item[] = [];
  for (let i = 0; i < part.length; i++) {
    const c = part[i]!;
    if (c === "*") {
      if (items.at(-1)?.kind !== "star") items.push({ kind: "star" });
    } else if (c === "?") items.push({ kind: "char", set: { kind: "any" } });
    else if (c === "\\" && i + 1 < part.length) {
      i++;
      items.push(literal(part[i]!));
    } else if (c === "[") {
      const close = part.indexOf("]", i + 2);
      if (close < 0) {
        items.push(literal(c));
        continue;
      }
      const set = parseClass(part.slice(i + 1, close));
      if (set === null) return null;
      items.push({ kind: "char", set });
      i = close;
    } else items.push(literal(c));
  }
  return items;
}

const literal = (c: string): Item => ({
  kind: "char",
  set: { kind: "set", chars: new Set([c]), ranges: [], negated: false },
});

/**
 * `a-z_`, `^x` (picomatch negates with `^` only: `[!x]` is `!` or `x`); null: a POSIX class
 * (`[:alpha:]`), not read here.
 */
function parseClass(body: string): CharSet | null {
  if (body.includes("[:")) return null;
  const negated = body.startsWith("^");
  const text = negated ? body.slice(1) : body;
  const chars = new Set<string>();
  const ranges: [string, string][] = [];
  for (let i = 0; i < text.length; i++) {
    const c = text[i] === "\\" && i + 1 < text.length ? text[++i]! : text[i]!;
    if (text[i + 1] === "-" && i + 2 < text.length) {
      ranges.push([c, text[i + 2]!]);
      i += 2;
    } else chars.add(c);
  }
  return { kind: "set", chars, ranges, negated };
}

function inSet(c: string, s: Extract<CharSet, { kind: "set" }>): boolean {
  const hit = s.chars.has(c) || s.ranges.some(([lo, hi]) => c >= lo && c <= hi);
  return s.negated ? !hit : hit;
}

/** The characters a positive set names (a range's, up to a bound: enough to find a common one). */
function members(s: Extract<CharSet, { kind: "set" }>): string[] {
  const out = [...s.chars];
  for (const [lo, hi] of s.ranges)
    for (let code = lo.charCodeAt(0); code <= hi.charCodeAt(0) && out.length < 4096; code++)
      out.push(String.fromCharCode(code));
  return out;
}

/** Whether one character (not `/`) is in both sets. */
function charsMeet(x: CharSet, y: CharSet): boolean {
  if (x.kind === "any" && y.kind === "any") return true;
  if (x.kind === "any") return charsMeet(y, x);
  if (y.kind === "any") return x.negated || members(x).some((c) => c !== "/");
  if (!x.negated) return members(x).some((c) => c !== "/" && inSet(c, y));
  if (!y.negated) return members(y).some((c) => c !== "/" && inSet(c, x));
  // Two negated sets leave almost every character.
  return true;
}

/** Whether some non-empty segment matches both patterns. */
function segmentsMeet(a: readonly Item[], b: readonly Item[]): boolean {
  return pairwise(a, b, (x, y, meet) => {
    if (x === undefined && y === undefined) return true;
    if (x?.kind === "star" && (meet(1, 0) || (y !== undefined && meet(0, 1)))) return true;
    if (y?.kind === "star" && (meet(0, 1) || (x !== undefined && meet(1, 0)))) return true;
    return x?.kind === "char" && y?.kind === "char" && charsMeet(x.set, y.set) && meet(1, 1);
  });
}

/** Whether some path matches both segment lists. */
function pathsMeet(a: readonly Segment[], b: readonly Segment[]): boolean {
  return pairwise(a, b, (x, y, meet) => {
    if (x === undefined && y === undefined) return true;
    if (x?.kind === "globstar")
      return meet(1, 0) || (y !== undefined && meet(0, 1)) || (y?.kind === "globstar" && meet(1, 1));
    if (y?.kind === "globstar") return meet(0, 1) || (x !== undefined && meet(1, 0));
    return x?.kind === "pattern" && y?.kind === "pattern" && segmentsMeet(x.items, y.items) && meet(1, 1);
  });
}

/**
 * Whether the two sequences can be matched up from their starts to their ends, `step` deciding
 * at each pair of places (`undefined`: past an end) from the places it may go on to (`meet(di,
 * dj)`). Memoized over the places, a cycle (a star that consumes nothing) counting as no match.
 */
function pairwise<T>(
  a: readonly T[],
  b: readonly T[],
  step: (x: T | undefined, y: T | undefined, meet: (di: number, dj: number) => boolean) => boolean,
): boolean {
  const memo = new Map<number, boolean>();
  const meet = (i: number, j: number): boolean => {
    const key = i * (b.length + 1) + j;
    const known = memo.get(key);
    if (known !== undefined) return known;
    memo.set(key, false);
    const ok = step(a[i], b[j], (di, dj) => meet(i + di, j + dj));
    memo.set(key, ok);
    return ok;
  };
  return meet(0, 0);
}
