import { describe, expect, it } from "vitest";
import { describeGitControls, gitControlFiles } from "../../src/task/git-controls.js";

describe("gitControlFiles", () => {
  it("names .gitattributes, .gitmodules, gitlinks and hook folders' files anywhere, and nothing else", () => {
    const found = gitControlFiles([
      { path: "src/a.ts", mode: "100644" },
      { path: ".gitattributes", mode: "100644" },
      { path: "vendor/lib/.gitattributes", mode: "100644" },
      { path: ".gitmodules", mode: "100644" },
      { path: "vendor/nested", mode: "160000" },
      { path: ".husky/pre-commit", mode: "100755" },
      { path: "tools/.githooks/post-merge", mode: "100755" },
      // Look-alikes: a file named like a folder, a folder named like a file.
      { path: "docs/.husky", mode: "100644" },
      { path: "notes/gitattributes.md", mode: "100644" },
      { path: "hooks/pre-commit", mode: "100755" },
    ]);
    expect(found).toEqual([
      { path: ".gitattributes", kind: "attributes" },
      { path: "vendor/lib/.gitattributes", kind: "attributes" },
      { path: ".gitmodules", kind: "submodules" },
      { path: "vendor/nested", kind: "nested_repository" },
      { path: ".husky/pre-commit", kind: "hooks" },
      { path: "tools/.githooks/post-merge", kind: "hooks" },
    ]);
    expect(describeGitControls(found.slice(0, 4))).toBe(
      ".gitattributes (attributes), vendor/lib/.gitattributes (attributes), .gitmodules (submodules), vendor/nested (nested repository)",
    );
    expect(describeGitControls(found)).toMatch(/ and 1 more$/);
  });
});
