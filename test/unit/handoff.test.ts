import { describe, expect, it } from "vitest";
import { checkHandoff, handoffTemplate } from "../../src/task/handoff.js";

describe("ALTO handoffs", () => {
  it("the template, left as it is, lacks every required section", () => {
    expect(checkHandoff(handoffTemplate("A"))).toEqual({
      missing: ["Summary", "Files Touched", "How to Verify"],
      listed: [],
    });
  });

  it("reads the files listed however the list is written, and the protocol's other headings", () => {
    const text = [
      "# Handoff: A",
      "## Summary",
      "Added the parser.",
      "## Files",
      "- src/a.ts",
      "* `src/b file.ts` (new)",
      "1. ./docs/c.md: why",
      "- src/a.ts — again",
      "## Verification",
      "npm test",
    ].join("\n");
    expect(checkHandoff(text)).toEqual({ missing: [], listed: ["src/a.ts", "src/b file.ts", "docs/c.md"] });
  });

  it("a section with only the template's comment is missing", () => {
    const text = handoffTemplate("A").replace("<!-- What was accomplished -->", "Did it.");
    expect(checkHandoff(text).missing).toEqual(["Files Touched", "How to Verify"]);
  });
});
