// The keys `termorch send --keys` presses: which it takes, how tmux is told, how a preset's known
// questions name theirs, and the commands the status line prints for them.
import { describe, expect, it } from "vitest";
import { PRESETS } from "../../src/agent/presets.js";
import {
  KeyAnswer,
  keyProblem,
  keysProblems,
  MAX_KEYS,
  SendKeys,
  tmuxKeyOf,
} from "../../src/contract/keys.js";
import { InputError } from "../../src/errors.js";
import { sendInputOf } from "../../src/ops/interactive.js";
import { sendHint } from "../../src/ops/status.js";

describe("keys termorch sends", () => {
  it("takes tmux's names of the keys a question is answered with, Esc, and one printable ASCII character", () => {
    for (const key of ["Enter", "Escape", "Esc", "Tab", "BTab", "Space", "BSpace", "Up", "Down", "PageDown"])
      expect(keyProblem(key), key).toBeNull();
    for (const key of ["1", "9", "y", "N", ";", "-", "'", "~"]) expect(keyProblem(key), key).toBeNull();
  });

  it("refuses anything else, which tmux would type as its letters or as a control key", () => {
    expect(keyProblem("enter")).toBe(
      '"enter" is not a key termorch sends (did you mean "Enter"?): a key is one of Enter, Escape, Tab, BTab, Space, BSpace, Up, Down, Left, Right, Home, End, PageUp, PageDown, Delete (Esc for Escape), or one printable ASCII character (a digit, a letter; Space for a space)',
    );
    for (const key of ["", "yes", "C-c", "M-x", "F1", " ", "é", "\u001b", "\r", "Enter;", "2 Enter"])
      expect(keyProblem(key), JSON.stringify(key)).not.toBeNull();
  });

  it("names each bad key by its place, and bounds how many one send presses", () => {
    expect(keysProblems(["2", "Enter"])).toEqual([]);
    expect(keysProblems([])).toEqual(["no key given"]);
    expect(keysProblems(["Down", "down", "Enter", "ok"])).toEqual([
      expect.stringMatching(/^key 2: "down" is not a key termorch sends \(did you mean "Down"\?\)/),
      expect.stringMatching(/^key 4: "ok" is not a key/),
    ]);
    expect(keysProblems(Array(MAX_KEYS + 1).fill("Down"))).toEqual([
      `${MAX_KEYS + 1} keys given: at most ${MAX_KEYS} a send`,
    ]);
  });

  it("the schema MCP and the contract take says the same", () => {
    expect(SendKeys.parse(["Esc", "2"])).toEqual(["Esc", "2"]);
    const bad = SendKeys.safeParse(["Down", "C-c"]);
    expect(bad.success).toBe(false);
    expect(bad.error?.issues[0]?.message).toMatch(/^"C-c" is not a key termorch sends/);
    expect(SendKeys.safeParse([]).success).toBe(false);
  });

  it("tells tmux a name as its key and a character as itself; Esc is tmux's Escape", () => {
    expect(tmuxKeyOf("Esc")).toEqual({ name: "Escape" });
    expect(tmuxKeyOf("Down")).toEqual({ name: "Down" });
    expect(tmuxKeyOf("2")).toEqual({ literal: "2" });
    expect(tmuxKeyOf(";")).toEqual({ literal: ";" });
    expect(() => tmuxKeyOf("C-c")).toThrow(/is not a key termorch sends/);
  });
});

describe("what a send answers with", () => {
  it("one of text, a file and keys; keys checked before anything is sent", () => {
    expect(sendInputOf("I", { text: "" })).toEqual({ text: "" });
    expect(sendInputOf("I", { file: "/tmp/a" })).toEqual({ file: "/tmp/a" });
    expect(sendInputOf("I", { keys: ["2"] })).toEqual({ keys: ["2"] });
    const problem = (given: Parameters<typeof sendInputOf>[1]): string => {
      try {
        sendInputOf("I", given);
      } catch (error) {
        expect(error).toBeInstanceOf(InputError);
        return (error as InputError).message;
      }
      throw new Error("accepted");
    };
    expect(problem({})).toBe(
      "send I: give one of text (TEXT), a file (--file F) and keys (--keys K...): none was given",
    );
    expect(problem({ text: "2", keys: ["2"] })).toMatch(/: text and keys were given$/);
    expect(problem({ keys: ["2", "Return"] })).toMatch(/^--keys: key 2: "Return" is not a key/);
  });

  it("the status line's command: the keys, quoted where a shell would read them, or TEXT", () => {
    expect(sendHint("r1", "I", ["2"])).toBe("termorch send I --keys 2 --run r1");
    expect(sendHint("r1", "I", ["Down", "Enter"])).toBe("termorch send I --keys Down Enter --run r1");
    expect(sendHint("r1", "I", [";", "'"])).toBe(`termorch send I --keys ';' ''\\''' --run r1`);
    expect(sendHint("r1", "I", null)).toBe("termorch send I TEXT --run r1");
  });
});

describe("the keys of each preset's known questions", () => {
  const dialogs = Object.entries(PRESETS).flatMap(([name, p]) =>
    p.interactive.dialogs.map((d) => ({ name, ...d })),
  );

  it("are keys termorch sends, and every question but a first-run set-up has some", () => {
    for (const d of dialogs) {
      for (const a of d.answers) expect(KeyAnswer.safeParse(a).success, `${d.name}: ${d.asks}`).toBe(true);
      if (!/first-run set-up/.test(d.asks))
        expect(d.answers.length, `${d.name}: ${d.asks}`).toBeGreaterThan(0);
    }
  });

  it("codex's model offer: 2 keeps the model, named first; its paste-ignoring menu is never answered with Enter", () => {
    const offer = dialogs.find((d) => d.name === "codex" && /new model/.test(d.asks))!;
    expect(offer.answers.map((a) => a.keys)).toEqual([["2"], ["1"]]);
    expect(offer.answers[0]?.picks).toMatch(/^2\. Use existing model/);
  });
});
