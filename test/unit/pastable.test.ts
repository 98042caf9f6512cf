import { describe, expect, it } from "vitest";
import { pastable } from "../../src/tmux/server.js";

describe("text pasted into an agent's terminal", () => {
  it("cannot end the bracketed paste itself and type the rest as keys", () => {
    expect(pastable("before\u001b[201~\rINJECTED\u001b[200~after")).toBe("before[201~\rINJECTED[200~after");
    expect(pastable("c1 \u009b201~ and \u0007bell\u0000")).toBe("c1 201~ and bell");
  });

  it("keeps text, tabs, line breaks and non-ASCII characters as they are", () => {
    const text = "# Task\n\n\tindented ✓ é 日本\r\nlast";
    expect(pastable(text)).toBe(text);
  });
});
