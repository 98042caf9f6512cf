import { describe, expect, it } from "vitest";
import { conflictUnits } from "../../src/git/fold.js";
import { parseMergeTree } from "../../src/git/merge-tree.js";

/** `git merge-tree --write-tree --messages --name-only -z` as git 2.39 writes it (fields joined by NUL). */
const output = (...fields: string[]): string => `${fields.join("\0")}\0`;
const result = (out: string) => ({ ...parseMergeTree(out), clean: false });

describe("conflictUnits", () => {
  it("tells a binary file's conflict once, though git says it twice", () => {
    const modified = output(
      "847b71a39dd579e2da390d34020c5430de83de09",
      "bin.dat",
      "",
      "1",
      "bin.dat",
      "CONFLICT (binary)",
      "warning: Cannot merge binary files: bin.dat (x vs. y)\n",
      "1",
      "bin.dat",
      "Auto-merging",
      "Auto-merging bin.dat\n",
      "1",
      "bin.dat",
      "CONFLICT (contents)",
      "CONFLICT (content): Merge conflict in bin.dat\n",
    );
    expect(conflictUnits(result(modified))).toEqual([{ kind: "content (binary)", paths: ["bin.dat"] }]);
    const added = modified.replace("CONFLICT (content): Merge", "CONFLICT (add/add): Merge");
    expect(conflictUnits(result(added))).toEqual([{ kind: "add/add (binary)", paths: ["bin.dat"] }]);
  });

  it("keeps every conflict of other files as git names it", () => {
    const two = output(
      "847b71a39dd579e2da390d34020c5430de83de09",
      "a.txt",
      "bin.dat",
      "",
      "1",
      "bin.dat",
      "CONFLICT (binary)",
      "warning: Cannot merge binary files: bin.dat (x vs. y)\n",
      "1",
      "a.txt",
      "CONFLICT (contents)",
      "CONFLICT (content): Merge conflict in a.txt\n",
    );
    // The binary file's message has no other to go with: it stands alone.
    expect(conflictUnits(result(two))).toEqual([
      { kind: "content (binary)", paths: ["bin.dat"] },
      { kind: "content", paths: ["a.txt"] },
    ]);
  });
});
