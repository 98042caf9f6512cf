// Predicted collisions (issue 39): whether two allowed_paths entries can name the same file, as
// the allowed_paths gate matches them (a glob, or anything below it). Exact cases, and a property
// against picomatch itself: no path both match is ever missed.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { matchesAny } from "../../src/fs/find-files.js";
import { globsOverlap } from "../../src/plan/glob-overlap.js";

describe("globsOverlap", () => {
  it.each([
    ["src/auth/**", "src/auth/login.ts", true],
    ["src/auth/**", "src/**/*.ts", true],
    ["src/auth/**", "src/users/**", false],
    ["**", "docs/x.md", true],
    ["src/*.ts", "src/a/b.ts", false],
    ["src/*.ts", "src/**/b.ts", true],
    ["src/*.ts", "src/*.js", false],
    ["src/[a-c]*.ts", "src/b.ts", true],
    ["src/[a-c]*.ts", "src/d.ts", false],
    ["src/[^a]x", "src/ax", false],
    ["src/[^a]x", "src/bx", true],
    // As picomatch reads it: `!` in a class is a character, not a negation; a class matches its text too.
    ["src/[!a]x", "src/ax", true],
    ["x[ab]y", "x\\[ab\\]y", true],
    ["src/?.ts", "src/ab.ts", false],
    ["src/?.ts", "src/*.ts", true],
    // A directory against a file below it: the gate lets the directory's task change the file.
    ["src/auth", "src/auth/login.ts", true],
    ["src/auth", "src/authz.ts", false],
    ["src/{auth,users}/**", "src/users/x.ts", true],
    ["src/{auth,users}/**", "src/admin/x.ts", false],
    ["a\\*b", "a*b", true],
    ["a\\*b", "axb", false],
    // What is not read here overlaps everything: a collision is never missed.
    ["src/@(a|b)/**", "docs/**", true],
  ])("%s against %s: %s", (a, b, overlap) => {
    expect(globsOverlap(a, b)).toBe(overlap);
    expect(globsOverlap(b, a)).toBe(overlap);
  });

  it("never misses a path both match (picomatch, as the allowed_paths gate)", () => {
    const seg = fc.constantFrom("a", "b", "ab", "*", "a*", "*b", "?", "[ab]", "[!a]", "[^a]", "**", "{a,b}");
    const glob = fc.array(seg, { minLength: 1, maxLength: 4 }).map((s) => s.join("/"));
    const path = fc
      .array(fc.constantFrom("a", "b", "ab", "ba", "c", "!", "[ab]"), { minLength: 1, maxLength: 5 })
      .map((s) => s.join("/"));
    fc.assert(
      fc.property(glob, glob, path, (a, b, p) => {
        if (matchesAny(p, [a]) && matchesAny(p, [b])) expect(globsOverlap(a, b)).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });
});

describe("predictCollisions", () => {
  it("names the pairs that may run at once and whose allowed_paths overlap, not those a dependency orders", async () => {
    const { predictCollisions, collisionText } = await import("../../src/plan/collisions.js");
    const nodes = [
      { id: "auth", dependencies: [], allowed_paths: ["src/auth/**"] },
      { id: "login", dependencies: [], allowed_paths: ["src/auth/login.ts", "test/**"] },
      { id: "users", dependencies: [], allowed_paths: ["src/users/**"] },
      { id: "tests", dependencies: ["login"], allowed_paths: ["test/**"] },
      { id: "free", dependencies: [] },
    ];
    const found = predictCollisions(nodes, ["auth", "login", "users", "free", "tests"]);
    expect(found).toEqual([{ tasks: ["auth", "login"], paths: [["src/auth/**", "src/auth/login.ts"]] }]);
    expect(collisionText(found[0]!)).toBe(
      "auth and login may both change src/auth/** and src/auth/login.ts; give one a dependency on the other or split the paths",
    );
  });
});
