import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative, resolve } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { cliEnv, ROOT, uniqueSocket } from "./harness.js";

const tmp = mkdtempSync(join(tmpdir(), "termorch-install-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Every relative link target of a Markdown file. */
function linksOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1]!)
    .filter((l) => !/^[a-z]+:/i.test(l) && !l.startsWith("#"));
}

describe("the README's promises to a new user", () => {
  it("links only to files inside the repository", () => {
    for (const doc of ["README.md", "docs/contract.md", "docs/ARCHITECTURE.md"]) {
      for (const link of linksOf(join(ROOT, doc))) {
        const target = resolve(dirname(join(ROOT, doc)), link.split("#")[0]!);
        expect(relative(ROOT, target).startsWith(".."), `${doc} links to ${link}`).toBe(false);
        expect(() => readFileSync(target), `${doc} links to ${link}`).not.toThrow();
      }
    }
  });

  it("the CLI installs from a packed tarball and works outside the checkout", () => {
    // `npm test` has built dist/ already; --ignore-scripts keeps pack from rebuilding it under other tests.
    const packed = execFileSync("npm", ["pack", "--ignore-scripts", "--pack-destination", tmp, "--silent"], {
      cwd: ROOT,
      encoding: "utf8",
    }).trim();
    const prefix = join(tmp, "prefix");
    execFileSync(
      "npm",
      ["install", "-g", "--prefix", prefix, "--no-audit", "--no-fund", "--silent", join(tmp, packed)],
      { cwd: tmp, encoding: "utf8" },
    );
    const termorch = join(prefix, "bin", "termorch");
    const version = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).version as string;
    expect(execFileSync(termorch, ["--version"], { cwd: tmp, encoding: "utf8" }).trim()).toBe(version);

    const work = join(tmp, "elsewhere");
    mkdirSync(join(work, "ctx"), { recursive: true });
    writeFileSync(join(work, "ctx", "a.md"), "# A\n");
    writeFileSync(
      join(work, "assignments.json"),
      JSON.stringify({
        tasks: [{ id: "A", agent: "x", context_path: "ctx/a.md", command: ["true"] }],
        environment: { workspace_dir: "." },
      }),
    );
    const out = execFileSync(termorch, ["validate", "assignments.json"], {
      cwd: work,
      encoding: "utf8",
      env: { ...process.env, ...cliEnv(uniqueSocket("install")) },
    });
    expect(out).toContain("1 task in 1 wave");
  });
});
