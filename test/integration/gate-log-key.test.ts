// A private key printed over several lines by a tests_cmd: the gate's logs follow the same
// redaction rules as an agent's (src/redact/RULES.md), however the output reached termorch.
import { describe, expect, it } from "vitest";
import { filesContaining, readReport, termorch, testFile, writeAssignments } from "./harness.js";

const { socket, workspace } = testFile("gate-log-key");

describe("a tests_cmd that prints a private key in two pieces", () => {
  it("leaves none of the key in any file, the gate's logs included", async () => {
    const { dir } = workspace();
    // The body is put together by the shell, so that the assignments file does not hold it; the
    // pause makes the key reach termorch in two reads, the BEGIN line in the first.
    const key = [
      'p="MIIBOgIBAAJBAKj34GkxFhD9"',
      "printf '%s\\n' before '-----BEGIN RSA PRIVATE KEY-----'",
      "sleep 0.3",
      `printf '%s\\n' "\${p}0aBcD" "\${p}1eFgH" '-----END RSA PRIVATE KEY-----' after`,
    ].join("; ");
    const file = writeAssignments(dir, [{ id: "t1", success_criteria: { tests_cmd: key } }]);
    const result = await termorch(["run", file], { socket });
    expect(result.exitCode, result.stderr).toBe(0);
    const gate = readReport(dir).tasks[0]!.gates.find((g) => g.name === "tests_cmd")!;
    expect(gate.passed).toBe(true);
    for (const line of ["MIIBOgIBAAJBAKj34GkxFhD90aBcD", "MIIBOgIBAAJBAKj34GkxFhD91eFgH"])
      expect(filesContaining(dir, line)).toEqual([]);
    expect(
      filesContaining(dir, "before\n[REDACTED]\n[REDACTED]\n[REDACTED]\n[REDACTED]\nafter\n").length,
    ).toBe(1);
  });
});
