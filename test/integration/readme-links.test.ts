import { readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { ROOT } from "./harness.js";

/** Every relative link target of a Markdown file. */
function linksOf(file: string): string[] {
  const text = readFileSync(file, "utf8");
  return [...text.matchAll(/\]\(([^)\s]+)\)/g)]
    .map((m) => m[1]!)
    .filter((l) => !/^[a-z]+:/i.test(l) && !l.startsWith("#"));
}

// The install from a packed tarball, the README's other promise, is `npm run test:install`'s
// (test/install/install.test.ts).
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
});
