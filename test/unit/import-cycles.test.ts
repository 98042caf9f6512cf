import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..", "src");

/** Every module under src/ with the modules it imports (type-only imports too: they tie the files as much). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const entry of readdirSync(SRC, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith(".ts")) continue;
    const file = join(entry.parentPath, entry.name);
    const text = readFileSync(file, "utf8");
    const specifiers = [
      ...text.matchAll(/^(?:import|export)\b[^;]*?\bfrom\s+"(\.[^"]+)"/gms),
      ...text.matchAll(/\bimport\(\s*"(\.[^"]+)"\s*\)/g),
    ].map((m) => m[1]!);
    graph.set(
      relative(SRC, file),
      specifiers.map((s) => relative(SRC, resolve(dirname(file), s.replace(/\.js$/, ".ts")))),
    );
  }
  return graph;
}

/** Each cycle once, as the path of files that closes it. */
function cycles(graph: Map<string, string[]>): string[] {
  const found: string[] = [];
  const state = new Map<string, "open" | "done">();
  const stack: string[] = [];
  const visit = (file: string): void => {
    state.set(file, "open");
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue;
      if (state.get(next) === "open") found.push([...stack.slice(stack.indexOf(next)), next].join(" -> "));
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, "done");
  };
  for (const file of [...graph.keys()].sort()) if (!state.has(file)) visit(file);
  return found;
}

describe("src/ modules", () => {
  it("import each other without cycles", () => {
    const graph = importGraph();
    expect(graph.size).toBeGreaterThan(50);
    expect(graph.get("cli/main.ts")).toContain("cli/operator.ts");
    expect(cycles(graph)).toEqual([]);
  });

  it("import only folders below their own (docs/ARCHITECTURE.md: the folders and what they may import)", () => {
    const upward: string[] = [];
    for (const [file, imports] of importGraph()) {
      const from = layerOf(file);
      for (const target of imports) {
        const to = layerOf(target);
        if (to > from) upward.push(`${file} -> ${target}`);
      }
    }
    expect(LAYERS.length).toBe(new Set(LAYERS).size);
    expect(upward).toEqual([]);
  });
});

/** Folders from the bottom up, as the architecture page lists them; `.` is src/errors.ts. */
const LAYERS = [
  ".",
  "contract",
  "concurrency",
  "redact",
  "log",
  "plan",
  "fs",
  "sandbox",
  "git",
  "runner",
  "tmux",
  "shell",
  "notify",
  "agent",
  "ledger",
  "spend",
  "input",
  "report",
  "task",
  "merge",
  "scale",
  "run",
  "planning",
  "ops",
  "daemon",
  "watch",
  "serve",
  "mcp",
  "cli",
];

function layerOf(file: string): number {
  const folder = file.includes("/") ? file.slice(0, file.indexOf("/")) : ".";
  const layer = LAYERS.indexOf(folder);
  if (layer < 0)
    throw new Error(`src/${folder}/ is in no layer: add it to LAYERS and to docs/ARCHITECTURE.md`);
  return layer;
}
