// The input campaign's generators (fast-check arbitraries): assignments files and configs that
// are wrong in every way the issue lists, each with what termorch must answer. An input is
// { cat, desc, assignments, config, configVia, expect } where a file is text, bytes (a Buffer)
// or { special: kind } (a directory, a FIFO, a symlink loop...), and `expect` is "invalid" (exit 2
// whatever the command) or "any" (a mutation that may still be valid: 0 or 2 from validate, and
// run agrees with validate).
import fc from "fast-check";

/** Relative to the folder the input files are written to (see input.mjs: in/cur/ and d/inbox/). */
export const WS_REL = "../../ws";

/** Things committed in the workspace repository (input.mjs makes them) that paths may point at. */
export const GOOD_PATHS = ["ctx/task.md", "README.md", "ctx-link/task.md", "task-link.md", "sub/x.md"];

export const HOSTILE_PATHS = [
  "..",
  "../outside.md",
  "../../outside.md",
  "/etc/passwd",
  "/",
  "/tmp",
  "ctx/../../outside.md",
  "ctx/../README.md",
  "link-etc/passwd",
  "link-etc",
  "loop-a",
  "loop-a/x",
  "self-loop",
  "self-loop/x",
  "up/outside.md",
  "up",
  "out-file",
  "dangling",
  "",
  ".",
  "./",
  ".git",
  ".git/config",
  ".git/HEAD",
  "ctx//task.md",
  "ctx/task.md\u0000x",
  "\u0000",
  "ctx/\u0001task.md",
  "ctx/t\u001b[31mask.md",
  "ctx/tásk.md",
  "\u202ectx/task.md",
  "~/x",
  "$HOME/x",
  "ctx/*",
  "**",
  "**/../..",
  "../**",
  "/**",
  "{..,x}/y",
  "[.][.]/x",
  "a".repeat(300),
  "a/".repeat(3000),
  "\\..\\..\\x",
  "C:\\x",
  "file:///etc/passwd",
  "ctx/task.md\n",
  " ctx/task.md",
  "ctx/task.md ",
  "-rf",
  "--help",
  "\ud800",
  "🙂/x",
  "ctx\\task.md",
];

export const HOSTILE_IDS = [
  "",
  "-a",
  "_a",
  "a b",
  "a\u0000b",
  "\u0000",
  "a\u0001",
  "a\u007f",
  "ä",
  "../x",
  "..",
  ".",
  "a/b",
  "a".repeat(64),
  "a".repeat(65),
  "integration",
  "moved",
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "valueOf",
  "t\n",
  "\u202e",
  "🙂",
  "a.b",
  "1e3",
  "0",
  "A",
  "a-",
  "HEAD",
  "main",
  "refs",
  "a..b",
  "a@{1}",
  "a~1",
  "lock",
  "x.lock",
  "\ud800",
  "\udfff",
];

const STRINGS = [
  ...HOSTILE_IDS,
  ...HOSTILE_PATHS,
  "true",
  "sh",
  "exit 0",
  "%s%n%x",
  "$(echo hi)",
  "`id`",
  "'",
  '"',
  "\\",
  "\t",
  "\r\n",
  "\u2028\u2029",
  "\ufeff",
  "\u0085",
  "日本語",
  "e\u0301",
  "NAME",
  "NAME=VALUE",
  "=x",
  "A=\u0000",
  "(?i)secret",
  "[",
  "(?<=a+)b",
  "(?{ 1 })",
  "\\p{L}+",
];

/** Numbers that are wrong, or right but extreme, somewhere. */
const NUMBERS = [0, -1, 1, 1.5, -0, 2 ** 31, 2 ** 53 + 2, 1e308, -1e308, 21, 2147484, 5e-324];

/** A short string that is not valid for the field's format, or a 1 MB one; from the pools or generated. */
const anyString = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom(...STRINGS) },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 12 }) },
  { weight: 2, arbitrary: fc.string({ unit: "grapheme", maxLength: 12 }) },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom("x", "é", "🙂", "\u0000", "a/", "../"), fc.integer({ min: 10, max: 20 }))
      .map(([unit, log2]) => unit.repeat(Math.ceil(2 ** log2 / unit.length))),
  },
  { weight: 1, arbitrary: fc.constant("x".repeat(1 << 20)) },
);

const jsonLeaf = fc.oneof(
  fc.constantFrom(null, true, false),
  fc.constantFrom(...NUMBERS),
  anyString,
  fc.constant([]),
  fc.constant({}),
);

// ---------------------------------------------------------------------------------------------
// Valid documents

const ID_POOL = ["a", "b", "c", "d", "e", "f", "t1", "t2", "A_b-9", "x0"];

/** A valid assignments document: 1-6 tasks in a DAG, the harmless agent of the campaign's config. */
export const validAssignments = fc
  .record({
    n: fc.integer({ min: 1, max: 6 }),
    edges: fc.array(fc.tuple(fc.nat(), fc.nat()), { maxLength: 8 }),
    runId: fc.option(fc.constantFrom("r1", "run-x", "R_2"), { nil: undefined }),
    explicitCommand: fc.array(fc.boolean(), { minLength: 6, maxLength: 6 }),
    timeouts: fc.boolean(),
    extras: fc.boolean(),
    context: fc.constantFrom("ctx/task.md", "ctx/task.md", "ctx-link/task.md", "task-link.md"),
  })
  .map(({ n, edges, runId, explicitCommand, timeouts, extras, context }) => {
    const ids = ID_POOL.slice(0, n);
    const deps = ids.map(() => new Set());
    for (const [x, y] of edges) {
      const i = x % n;
      const j = y % n;
      if (j < i) deps[i].add(ids[j]); // only earlier tasks: acyclic
    }
    const doc = {
      ...(runId ? { run_id: runId } : {}),
      tasks: ids.map((id, i) => ({
        id,
        agent: "ok",
        context_path: context,
        dependencies: [...deps[i]],
        ...(explicitCommand[i] ? { command: ["true"] } : {}),
        ...(timeouts ? { timeout_s: 60, retries: 0 } : {}),
        ...(extras && i === 0
          ? {
              env: { FOO: "bar" },
              allowed_paths: ["**"],
              success_criteria: { required_artifacts: [] },
            }
          : {}),
      })),
      environment: {
        workspace_dir: WS_REL,
        ...(extras ? { env_vars: ["PATH", "X=1"], resource_limits: { max_parallel: 2, timeout_s: 60 } } : {}),
      },
      ...(extras ? { success_criteria: { required_artifacts: [] }, mode: { verify: true } } : {}),
    };
    return doc;
  });

/** A valid config: the harmless agent "ok" (and a few settings to break). */
export const validConfig = fc
  .record({ extras: fc.boolean(), redact: fc.boolean() })
  .map(({ extras, redact }) => ({
    // The harmless agent changes nothing, and says so (else every run fails with no_changes).
    agents: {
      ok: { command: ["true"], expect_changes: false, ...(extras ? { timeout_s: 60, env: { A: "1" } } : {}) },
    },
    ...(redact ? { redact: ["(?i)secret-[a-z]+", "tok_[0-9]{4}"] } : {}),
    ...(extras
      ? {
          defaults: { max_parallel: 2, kill_grace_s: 1, session_size: "80x24", history_limit: 100 },
          secret_env: ["MY_SECRET"],
          git: { pool: { max_worktrees: 2 } },
        }
      : {}),
  }));

// ---------------------------------------------------------------------------------------------
// Paths inside a JSON value

/** Every path to a value in `doc` (the root excluded): [key, key, ...]. */
export function valuePaths(doc) {
  const out = [];
  const walk = (v, path) => {
    if (path.length) out.push(path);
    if (Array.isArray(v)) for (const [i, x] of v.entries()) walk(x, [...path, i]);
    else if (v !== null && typeof v === "object") for (const k of Object.keys(v)) walk(v[k], [...path, k]);
  };
  walk(doc, []);
  return out;
}

function objectPaths(doc) {
  const out = [[]];
  for (const p of valuePaths(doc)) {
    const v = get(doc, p);
    if (v !== null && typeof v === "object" && !Array.isArray(v)) out.push(p);
  }
  return out;
}

export function get(doc, path) {
  return path.reduce((v, k) => v?.[k], doc);
}

/** `doc` with `value` at `path` (a copy; JSON.parse keeps a "__proto__" key as an own property). */
export function setAt(doc, path, value) {
  const copy = clone(doc);
  if (path.length === 0) return value;
  const parent = get(copy, path.slice(0, -1));
  Object.defineProperty(parent, path[path.length - 1], {
    value,
    enumerable: true,
    writable: true,
    configurable: true,
  });
  return copy;
}

function removeAt(doc, path) {
  const copy = clone(doc);
  const parent = get(copy, path.slice(0, -1));
  const key = path[path.length - 1];
  if (Array.isArray(parent)) parent.splice(key, 1);
  else delete parent[key];
  return copy;
}

export function clone(doc) {
  return JSON.parse(JSON.stringify(doc));
}

const pick = (xs, k) => xs[k % xs.length];

/** Is `path` inside a free-form record (task/agent env, config agents) where new keys are allowed? */
function inRecord(path) {
  const last = path[path.length - 1];
  return last === "env" || last === "agents";
}

/** Where a field's value is a string the schema constrains by format, not type. */
function stringPaths(doc) {
  return valuePaths(doc).filter((p) => typeof get(doc, p) === "string");
}

function wrongTypeFor(value) {
  const t = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
  const options = {
    string: [1, true, null, ["x"], { a: "x" }],
    number: ["1", true, null, [1], {}],
    boolean: ["true", 1, 0, null, [true]],
    null: [0, "", false],
    array: ["[]", {}, 1, null, true],
    object: [[], "{}", 1, null, false],
  }[t];
  return options;
}

// ---------------------------------------------------------------------------------------------
// Mutations of a document: each gives [doc or text, expect, desc]

const text = (doc) => `${JSON.stringify(doc, null, 2)}\n`;

/** Mutations of a valid document `base` (assignments or config), by category. */
function docMutations(base, isConfig) {
  const requiredKeys = isConfig
    ? [["agents", "ok"]]
    : [
        ["tasks"],
        ["environment"],
        ["environment", "workspace_dir"],
        ["tasks", 0, "id"],
        ["tasks", 0, "agent"],
        ["tasks", 0, "context_path"],
      ];
  return {
    wrong_type: fc.tuple(fc.nat(), fc.nat()).map(([k, m]) => {
      const path = pick(valuePaths(base), k);
      const value = pick(wrongTypeFor(get(base, path)), m);
      // An agent without a command is a preset, a valid-but-different agent: not a type error.
      return [setAt(base, path, value), "any", `${path.join(".")} = ${JSON.stringify(value)}`];
    }),
    keys: fc
      .tuple(
        fc.oneof(
          fc.constant("missing"),
          fc.constantFrom("__proto__", "constructor", "prototype", "toString", "__defineGetter__"),
          fc.constantFrom(
            "ID",
            "Tasks",
            "depends_on",
            "dependency",
            "workspace",
            "tasks ",
            "\u0000",
            "",
            "é",
            "$schema2",
          ),
          fc.string({ maxLength: 8 }),
        ),
        fc.nat(),
        fc.nat(),
        jsonLeaf,
      )
      .map(([key, k, m, value]) => {
        if (key === "missing") {
          const path = pick(requiredKeys, m);
          return [removeAt(base, path), isConfig ? "any" : "invalid", `missing ${path.join(".")}`];
        }
        const at = pick(objectPaths(base), k);
        const existing = get(base, at);
        const valid = inRecord(at) || Object.hasOwn(existing, key);
        return [
          setAt(base, [...at, key], value),
          valid ? "any" : "invalid",
          `extra key ${JSON.stringify(key)} at ${at.join(".") || "(root)"}`,
        ];
      }),
    strings: fc.tuple(fc.nat(), anyString).map(([k, s]) => {
      const path = pick(stringPaths(base), k);
      return [setAt(base, path, s), "any", `${path.join(".")} = ${preview(s)}`];
    }),
    deep: fc
      .tuple(
        fc.oneof(
          fc.integer({ min: 1, max: 100 }),
          fc.integer({ min: 100, max: 100_000 }),
          fc.constant(100_000),
        ),
        fc.constantFrom("[", "{"),
        fc.nat(),
        fc.boolean(),
      )
      .map(([depth, open, k, asExtra]) => {
        const nest =
          open === "["
            ? `${"[".repeat(depth)}${"]".repeat(depth)}`
            : `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
        const at = asExtra ? [...pick(objectPaths(base), k), "nested"] : pick(valuePaths(base), k);
        const doc = setAt(base, at, "@@DEEP@@");
        const expect = asExtra && inRecord(at.slice(0, -1)) ? "any" : "invalid";
        return [text(doc).replace('"@@DEEP@@"', nest), expect, `${depth}-deep ${open} at ${at.join(".")}`];
      }),
    structure: fc
      .tuple(
        fc.constantFrom("swap", "copy", "drop", "dup-task", "number", "rename", "wrap", "unwrap"),
        fc.nat(),
        fc.nat(),
        fc.constantFrom(...NUMBERS),
      )
      .map(([op, k, m, num]) => {
        const paths = valuePaths(base);
        const a = pick(paths, k);
        const b = pick(paths, m);
        let doc;
        switch (op) {
          case "swap":
            if (a.join("\0").startsWith(b.join("\0")) || b.join("\0").startsWith(a.join("\0"))) doc = base;
            else doc = setAt(setAt(base, a, get(base, b)), b, get(base, a));
            break;
          case "copy":
            doc = b.join("\0").startsWith(a.join("\0")) ? base : setAt(base, b, clone(get(base, a)));
            break;
          case "drop":
            doc = removeAt(base, a);
            break;
          case "dup-task":
            doc = isConfig
              ? setAt(base, ["agents", "ok2"], get(base, ["agents", "ok"]))
              : setAt(base, ["tasks"], [...base.tasks, clone(pick(base.tasks, k))]);
            break;
          case "number": {
            const nums = paths.filter((p) => typeof get(base, p) === "number");
            doc = nums.length ? setAt(base, pick(nums, k), num) : setAt(base, a, num);
            break;
          }
          case "rename": {
            const objs = objectPaths(base).filter((p) => Object.keys(get(base, p)).length);
            const at = pick(objs, k);
            const key = pick(Object.keys(get(base, at)), m);
            const renamed = `${key}_`;
            doc = setAt(removeAt(base, [...at, key]), [...at, renamed], get(base, [...at, key]));
            break;
          }
          case "wrap":
            doc = setAt(base, a, [get(base, a)]);
            break;
          case "unwrap": {
            const v = get(base, a);
            doc = setAt(base, a, Array.isArray(v) ? (v[0] ?? null) : v);
            break;
          }
        }
        return [doc, "any", `${op} ${a.join(".")} ${b.join(".")}`];
      }),
  };
}

/** Mutations of a document's text: encodings, truncations, bytes. */
function textMutations(docText) {
  const bytes = Buffer.from(docText, "utf8");
  return {
    encoding: fc
      .tuple(
        fc.constantFrom(
          "utf16le-bom",
          "utf16be-bom",
          "utf16le",
          "utf16be",
          "utf8-bom",
          "utf32le-bom",
          "invalid-byte",
          "overlong",
          "surrogate-bytes",
          "cut-char",
          "latin1",
          "nul",
          "lone-surrogate-escape",
          "bom-middle",
          "cesu8",
        ),
        fc.nat(),
      )
      .map(([how, k]) => {
        const at = k % (bytes.length + 1);
        const insert = (b) => Buffer.concat([bytes.subarray(0, at), Buffer.from(b), bytes.subarray(at)]);
        // A spot inside a string value: between a task id's quotes.
        const inString = docText.indexOf('"id": "') + 7;
        const strAt = Buffer.byteLength(docText.slice(0, inString));
        const insertInString = (b) =>
          Buffer.concat([bytes.subarray(0, strAt), Buffer.from(b), bytes.subarray(strAt)]);
        const swap16 = (buf) => {
          const out = Buffer.from(buf);
          out.swap16();
          return out;
        };
        switch (how) {
          case "utf16le-bom":
            return [
              Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(docText, "utf16le")]),
              "invalid",
              how,
            ];
          case "utf16be-bom":
            return [
              Buffer.concat([Buffer.from([0xfe, 0xff]), swap16(Buffer.from(docText, "utf16le"))]),
              "invalid",
              how,
            ];
          case "utf16le":
            return [Buffer.from(docText, "utf16le"), "invalid", how];
          case "utf16be":
            return [swap16(Buffer.from(docText, "utf16le")), "invalid", how];
          case "utf8-bom":
            return [Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), bytes]), "any", how];
          case "utf32le-bom": {
            const out = Buffer.alloc(4 + docText.length * 4);
            out.set([0xff, 0xfe, 0, 0]);
            for (const [i, c] of [...docText].entries()) out.writeUInt32LE(c.codePointAt(0), 4 + i * 4);
            return [out, "invalid", how];
          }
          case "invalid-byte":
            return [insert([0xff]), "invalid", `${how} at ${at}`];
          case "overlong":
            return [insertInString([0xc0, 0xaf]), "invalid", how];
          case "surrogate-bytes":
            return [insertInString([0xed, 0xa0, 0x80]), "invalid", how];
          case "cut-char":
            return [insertInString([0xe2, 0x82]), "invalid", how];
          case "latin1":
            return [insertInString([0xe9]), "invalid", how];
          case "nul":
            return [insert([0]), "invalid", `${how} at ${at}`];
          case "lone-surrogate-escape":
            return [insertInString(Buffer.from("\\ud800")), "invalid", how];
          case "bom-middle":
            return [insert([0xef, 0xbb, 0xbf]), "any", `${how} at ${at}`];
          case "cesu8":
            return [insertInString([0xed, 0xa0, 0xbd, 0xed, 0xb8, 0x80]), "invalid", how];
          default:
            throw new Error(`unknown encoding mutation ${how}`);
        }
      }),
    truncation: fc.nat().map((k) => {
      const cut = k % bytes.length;
      const part = bytes.subarray(0, cut);
      const valid = part.toString("utf8").trim() === docText.trim() && cut > 0;
      return [Buffer.from(part), valid ? "any" : "invalid", `first ${cut} of ${bytes.length} bytes`];
    }),
    bytes: fc
      .array(
        fc.tuple(fc.constantFrom("flip", "set", "insert", "delete", "dup"), fc.nat(), fc.nat({ max: 255 })),
        {
          minLength: 1,
          maxLength: 8,
        },
      )
      .map((ops) => {
        let b = Buffer.from(bytes);
        for (const [op, k, v] of ops) {
          const at = k % Math.max(1, b.length);
          if (op === "flip") b[at] ^= 1 << (v % 8);
          else if (op === "set") b[at] = v;
          else if (op === "insert") b = Buffer.concat([b.subarray(0, at), Buffer.from([v]), b.subarray(at)]);
          else if (op === "delete") b = Buffer.concat([b.subarray(0, at), b.subarray(at + 1)]);
          else b = Buffer.concat([b.subarray(0, at), b.subarray(at, at + (v % 16) + 1), b.subarray(at)]);
        }
        return [b, "any", ops.map((o) => o.join(":")).join(" ")];
      }),
  };
}

function preview(s) {
  const shown = JSON.stringify(s.length > 40 ? `${s.slice(0, 40)}…(${s.length})` : s);
  return shown;
}

// ---------------------------------------------------------------------------------------------
// Categories

const asInput = (cat, [content, expect, desc], extra = {}) => ({
  cat,
  desc,
  assignments: typeof content === "string" || Buffer.isBuffer(content) ? content : text(content),
  config: null,
  configVia: "flag",
  expect,
  ...extra,
});

/** A category of assignments-file malformations on a valid document (with a valid config). */
function assignmentsCategory(cat) {
  return fc.tuple(validAssignments, validConfig, fc.nat()).chain(([doc, config]) => {
    const docText = text(doc);
    const arb = docMutations(doc, false)[cat] ?? textMutations(docText)[cat];
    return arb.map((m) => asInput(cat, m, { config: text(config) }));
  });
}

/** Paths: a hostile path in a path field (context_path, allowed_paths, artifacts, include/copy, workspace_dir, done_when). */
const pathsCategory = fc
  .tuple(
    validAssignments,
    validConfig,
    fc.constantFrom(
      "context_path",
      "allowed_paths",
      "required_artifacts",
      "run_required_artifacts",
      "worktree_include",
      "worktree_copy",
      "workspace_dir",
      "done_when",
    ),
    fc.oneof(
      { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_PATHS) },
      { weight: 1, arbitrary: fc.constantFrom(...GOOD_PATHS) },
    ),
    fc.nat(),
  )
  .map(([doc, config, field, p, k]) => {
    const i = k % doc.tasks.length;
    const d = clone(doc);
    const t = d.tasks[i];
    if (field === "context_path") t.context_path = p;
    else if (field === "allowed_paths") t.allowed_paths = [p];
    else if (field === "required_artifacts") t.success_criteria = { required_artifacts: [p] };
    else if (field === "run_required_artifacts") d.success_criteria = { required_artifacts: [p] };
    else if (field === "worktree_include") d.environment.worktree_include = [p];
    else if (field === "worktree_copy") d.environment.worktree_copy = [p];
    else if (field === "workspace_dir") d.environment.workspace_dir = p;
    else {
      t.interactive = true;
      t.done_when = p;
    }
    // What must be refused is decided against the real workspace (input.mjs: mustRefuse).
    return asInput("paths", [d, "any", `${field} = ${preview(p)}`], {
      config: text(config),
      pathCheck: { field, path: p },
    });
  });

/** Ids: hostile task ids, run ids, dependencies and agent names. */
const idsCategory = fc
  .tuple(
    validAssignments,
    validConfig,
    fc.constantFrom("task", "run", "dep", "agent", "env-key"),
    fc.constantFrom(...HOSTILE_IDS),
    fc.nat(),
  )
  .map(([doc, config, field, id, k]) => {
    const d = clone(doc);
    const i = k % d.tasks.length;
    let expect = "any";
    if (field === "task") {
      // Renamed with the dependencies that name it, so the graph stays whole.
      const old = d.tasks[i].id;
      d.tasks[i].id = id;
      for (const t of d.tasks) t.dependencies = t.dependencies.map((x) => (x === old ? id : x));
    } else if (field === "run") d.run_id = id;
    else if (field === "dep") {
      d.tasks[i].dependencies.push(id);
      if (!d.tasks.some((t) => t.id === id)) expect = "invalid";
    } else if (field === "agent") d.tasks[i].agent = id;
    else {
      const env = {};
      Object.defineProperty(env, id, { value: "v", enumerable: true, writable: true, configurable: true });
      d.tasks[i].env = env;
    }
    // Ids become file, branch and session names: anything outside the pattern is refused.
    const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
    if ((field === "task" || field === "run") && !ID.test(id)) expect = "invalid";
    if (field === "task" && ["integration", "moved"].includes(id)) expect = "invalid";
    if (field === "agent" && id === "") expect = "invalid";
    return asInput("ids", [d, expect, `${field} = ${preview(id)}`], { config: text(config) });
  });

/** Graphs: cycles of every length up to 10,000, self-dependencies, duplicates, unknown ids, long chains. */
const graphCategory = fc
  .tuple(
    fc.constantFrom("cycle", "cycle", "self", "duplicate", "unknown", "chain", "dup-dep", "cycle-tail"),
    fc.oneof(
      { weight: 5, arbitrary: fc.integer({ min: 1, max: 12 }) },
      { weight: 3, arbitrary: fc.integer({ min: 13, max: 1000 }) },
      { weight: 1, arbitrary: fc.integer({ min: 1000, max: 10_000 }) },
      { weight: 1, arbitrary: fc.constant(10_000) },
    ),
    fc.nat(),
    validConfig,
  )
  .map(([kind, n, k, config]) => {
    const id = (i) => `t${i}`;
    const task = (i, deps) => ({ id: id(i), agent: "ok", context_path: "ctx/task.md", dependencies: deps });
    let tasks;
    let expect = "invalid";
    if (kind === "cycle") tasks = Array.from({ length: n }, (_, i) => task(i, [id((i + 1) % n)]));
    else if (kind === "cycle-tail")
      // A long valid chain leading into a short cycle at its end.
      tasks = Array.from({ length: n + 2 }, (_, i) => task(i, i === n + 1 ? [id(n)] : [id(i + 1)]));
    else if (kind === "self")
      tasks = Array.from({ length: Math.min(n, 50) }, (_, i) =>
        task(i, i === k % Math.min(n, 50) ? [id(i)] : []),
      );
    else if (kind === "duplicate")
      tasks = Array.from({ length: n + 1 }, (_, i) => task(i === n ? k % n : i, []));
    else if (kind === "unknown")
      tasks = Array.from({ length: n }, (_, i) => task(i, i === k % n ? [id(n + 1)] : []));
    else if (kind === "dup-dep") {
      tasks = Array.from({ length: Math.min(n, 50) + 1 }, (_, i) => task(i, i ? [id(0), id(0)] : []));
      expect = "any";
    } else {
      tasks = Array.from({ length: n }, (_, i) => task(i, i ? [id(i - 1)] : []));
      expect = "any";
    }
    const doc = { tasks, environment: { workspace_dir: WS_REL } };
    return asInput("graph", [JSON.stringify(doc), expect, `${kind} n=${n}`], {
      config: text(config),
      tasks: tasks.length,
    });
  });

/** Configs: the same malformations in the config, given with --config or $TERMORCH_CONFIG. */
const configCategory = fc
  .tuple(
    validAssignments,
    validConfig,
    fc.constantFrom(
      "wrong_type",
      "keys",
      "strings",
      "deep",
      "structure",
      "encoding",
      "truncation",
      "bytes",
      "redact",
      "agent",
    ),
    fc.constantFrom("flag", "env"),
  )
  .chain(([doc, config, cat, via]) => {
    // Tasks name their agent only: the config decides what they run.
    const d = clone(doc);
    for (const t of d.tasks) delete t.command;
    const docText = text(d);
    const cText = text(config);
    const special = {
      redact: fc
        .constantFrom(
          "[",
          "(?<=a+)b",
          "(?{ system('id') })",
          "\\",
          "(",
          "a{2,1}",
          "(?i)ok",
          "\u0000",
          "(?P<n>x)",
          "x".repeat(100_000),
        )
        .map((p) => [setAt(config, ["redact"], [p]), "any", `redact ${preview(p)}`]),
      agent: fc
        .constantFrom(
          { command: [] },
          { command: ["true"], preset: "claude" },
          { preset: "nope" },
          {},
          { tty: true, preset: "claude" },
          { command: ["\u0000"] },
          { command: ["true"], env: { "1A": "x" } },
          { command: ["true"], timeout_s: 0 },
          { command: ["true"], timeout_s: 1e10 },
          { preset: "codex", dangerously_bypass_permissions: true },
        )
        .map((spec) => [setAt(config, ["agents", "ok"], spec), "any", `agent ${JSON.stringify(spec)}`]),
    }[cat];
    const arb = special ?? docMutations(config, true)[cat] ?? textMutations(cText)[cat];
    return arb.map(([content, expect, desc]) => ({
      cat: "config",
      desc: `${cat}: ${desc} (via ${via})`,
      assignments: docText,
      config: typeof content === "string" || Buffer.isBuffer(content) ? content : text(content),
      configVia: via,
      expect,
    }));
  });

/** The files themselves: not regular files, loops, missing, odd names. */
export const SPECIALS = [
  "missing",
  "dir",
  "loop",
  "self-loop",
  "dangling",
  "fifo",
  "dev-zero",
  "dev-null",
  "symlink-to-valid",
  "long-name",
  "ctrl-name",
  "unreadable",
  "dotdot",
  "empty",
  "too-long-name",
];
const filesCategory = fc
  .tuple(
    validAssignments,
    validConfig,
    fc.constantFrom(...SPECIALS),
    fc.constantFrom("assignments", "config"),
    fc.constantFrom("flag", "env"),
  )
  .map(([doc, config, special, which, via]) => ({
    cat: "files",
    desc: `${which} is ${special}${which === "config" ? ` (via ${via})` : ""}`,
    assignments: which === "assignments" ? { special, target: text(doc) } : text(doc),
    config: which === "config" ? { special, target: text(config) } : text(config),
    configVia: via,
    expect: ["symlink-to-valid", "ctrl-name", "long-name"].includes(special) ? "any" : "invalid",
  }));

export const CATEGORIES = {
  wrong_type: assignmentsCategory("wrong_type"),
  keys: assignmentsCategory("keys"),
  strings: assignmentsCategory("strings"),
  ids: idsCategory,
  paths: pathsCategory,
  graph: graphCategory,
  deep: assignmentsCategory("deep"),
  encoding: assignmentsCategory("encoding"),
  truncation: assignmentsCategory("truncation"),
  bytes: assignmentsCategory("bytes"),
  structure: assignmentsCategory("structure"),
  config: configCategory,
  files: filesCategory,
};

/** Run ids and paths for the operator commands (resume, status, clean, cancel, logs, attach, verify-ledger). */
export const ODD_REFS = [
  "..",
  ".",
  "/",
  "../..",
  "a/../..",
  "../../../../../../../../etc",
  "/etc",
  "/proc/self",
  "/dev/null",
  "ws",
  "ws/.git",
  "in",
  "d",
  "nonexistent",
  "run\u0001id",
  "run\tid",
  "run\nid",
  "\u001b]0;title\u0007",
  "\u001b[2J",
  "\u007f",
  "a".repeat(255),
  "a".repeat(256),
  "a".repeat(5000),
  "x/".repeat(2000),
  "🙂",
  "\u202e",
  "%s%n",
  "$(id)",
  " ",
  "",
  "~",
  "*",
  "state.json",
  "events.jsonl",
  "x.jsonl",
  "integration",
  "__proto__",
  "constructor",
  "r1",
];
export const refArb = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...ODD_REFS) },
  {
    weight: 1,
    arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 20 }).filter((s) => !s.includes("\0")),
  },
);
export const OPERATOR_COMMANDS = [
  "resume",
  "status",
  "clean",
  "cancel",
  "logs",
  "attach",
  "verify-ledger",
  "logs-task",
];
