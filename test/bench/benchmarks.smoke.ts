import { execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { execa } from "execa";
import { describe, expect, it } from "vitest";
import { has, type Need } from "../needs.js";

// Every benchmark in its smallest form (bench/run.js NAME --smoke), so that one that no longer
// runs (a module moved under it, a contract it fakes changed) fails CI: each must produce its
// figures, every one a finite number, no benchmark failed, and each of its checks (bytes intact,
// tasks succeeded: not a cost) met. What a figure is never matters here: no timing is asserted.

const ROOT = resolve(import.meta.dirname, "..", "..");
const RUN = join(ROOT, "bench", "run.js");

interface Row {
  name: string;
  figure: unknown;
  baseline: unknown;
  ratio: unknown;
  met: boolean | null;
  check?: boolean;
}
interface Result {
  name: string;
  failed?: string;
  rows: Row[];
}

/** Every benchmark bench/run.js knows, the opt-in ones (scale) included. */
const NAMES = execFileSync(process.execPath, [RUN, "--list"], { encoding: "utf8" }).trim().split("\n");

interface Smoke {
  /** The result's name. */
  name: string;
  args: string[];
  need?: Need;
}

const SMOKES: Smoke[] = [
  ...NAMES.map((name) => ({
    name,
    args: [RUN, name, "--smoke"],
    need: ({ sandbox: "bwrap", scale: "redis-server" } as Record<string, Need>)[name],
  })),
  // scale.js's other mode, simulated workers: reached only through its own command line.
  {
    name: "scale-stub",
    args: [join(ROOT, "bench", "scale.js"), "--stub", "2", "--smoke"],
    need: "redis-server",
  },
];

/** What is wrong with one row's figures, or nothing. */
function rowProblems(row: Row): string[] {
  const problems: string[] = [];
  const finite = (v: unknown) => typeof v === "number" && Number.isFinite(v);
  if (typeof row.figure === "string") {
    // A figure written out ("0 differ", "12 / 30 ms", "6/6"): no number in it may be missing.
    if (row.figure === "" || /NaN|Infinity|undefined|null/.test(row.figure))
      problems.push(`figure ${JSON.stringify(row.figure)}`);
  } else if (!finite(row.figure)) {
    // A benchmark says when a tool it uses is missing (supervisor's C prototype without cc); CI
    // has them all (.ci/run installs them), so there it is a failure, as in test/needs.ts.
    const missingTool = row.figure === null && /: not measured \(/.test(row.name);
    if (!missingTool || process.env.CI === "true") problems.push(`figure ${String(row.figure)}`);
    else console.warn(`bench smoke: ${row.name}`);
  }
  for (const key of ["baseline", "ratio"] as const)
    if (row[key] !== null && !finite(row[key])) problems.push(`${key} ${String(row[key])}`);
  if (row.check && row.met !== true) problems.push("its check is not met");
  return problems.map((p) => `${row.name}: ${p}`);
}

describe("every benchmark in its smallest form (--smoke)", () => {
  it("has the built CLI to run", () => {
    expect(existsSync(join(ROOT, "dist", "cli", "main.js")), "run `npm run build` first").toBe(true);
  });

  it("knows its benchmarks", () => {
    expect(NAMES).toEqual(expect.arrayContaining(["overhead", "logs", "views", "scale"]));
  });

  it("finds a figure that is missing or not a number, and a check not met", () => {
    const ok: Row = { name: "x", figure: 1.5, baseline: 2, ratio: 0.75, met: null };
    expect(rowProblems(ok)).toEqual([]);
    expect(rowProblems({ ...ok, figure: "3 / 4 ms" })).toEqual([]);
    expect(rowProblems({ ...ok, figure: Number.NaN })).toEqual(["x: figure NaN"]);
    expect(rowProblems({ ...ok, figure: null })).toEqual(["x: figure null"]);
    expect(rowProblems({ ...ok, figure: "undefined / 4 ms" })).toHaveLength(1);
    expect(rowProblems({ ...ok, ratio: Number.POSITIVE_INFINITY })).toEqual(["x: ratio Infinity"]);
    expect(rowProblems({ ...ok, check: true, met: false })).toEqual(["x: its check is not met"]);
    expect(rowProblems({ ...ok, check: true, met: true })).toEqual([]);
  });

  for (const smoke of SMOKES) {
    it(`${smoke.name} produces its figures`, async (ctx) => {
      if (smoke.need && !has(smoke.need, `the ${smoke.name} benchmark's smoke (test/bench/)`)) ctx.skip();
      const dir = mkdtempSync(join(tmpdir(), "termorch-bench-smoke-"));
      try {
        const file = join(dir, "result.json");
        const r = await execa(process.execPath, [...smoke.args, "--json", file], {
          reject: false,
          cwd: ROOT,
          all: true,
          timeout: 280_000,
        });
        const output = `exit ${r.exitCode}\n${String(r.all).slice(-6000)}`;
        expect(existsSync(file), `no result written\n${output}`).toBe(true);
        const json = JSON.parse(readFileSync(file, "utf8")) as { results?: Result[] } & Result;
        // run.js writes { results: [...] }; scale.js's own command line one result.
        const results = json.results ?? [json];
        expect(
          results.map((x) => x.name),
          output,
        ).toEqual([smoke.name]);
        const result = results[0]!;
        expect(result.failed, output).toBeUndefined();
        expect(r.exitCode, output).toBe(0);
        expect(result.rows.length, output).toBeGreaterThan(0);
        expect(result.rows.flatMap(rowProblems), output).toEqual([]);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  }
});
