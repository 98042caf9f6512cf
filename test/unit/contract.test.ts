import { describe, expect, it } from "vitest";
import { Assignments } from "../../src/contract/assignments.js";
import { jsonSchemaOf } from "../../src/contract/json-schema.js";
import { parseWith } from "../../src/contract/parse.js";
import { InputError } from "../../src/errors.js";

const valid = { tasks: [{ id: "A", agent: "x", context_path: "a.md" }], environment: { workspace_dir: "." } };

function problemsOf(data: unknown) {
  try {
    parseWith(Assignments, data, "as.json");
  } catch (error) {
    if (error instanceof InputError) return error.problems;
    throw error;
  }
  return [];
}

describe("assignments schema", () => {
  it("accepts the minimal file and fills defaults", () => {
    const a = parseWith(Assignments, valid, "as.json");
    expect(a.tasks[0]?.dependencies).toEqual([]);
    expect(a.mode).toEqual({ dry_run: false, verify: true });
  });

  it("rejects unknown keys with their path and task", () => {
    const problems = problemsOf({ ...valid, tasks: [{ ...valid.tasks[0], dependecies: [] }] });
    expect(problems).toEqual([
      {
        file: "as.json",
        field: "tasks[0]",
        task: "A",
        message: expect.stringContaining('unknown key "dependecies"'),
      },
    ]);
  });

  it("rejects ids that cannot be file, branch and session names", () => {
    for (const id of ["../x", "a b", "-a", "a:b", "a.b", "x".repeat(65), ""]) {
      expect(problemsOf({ ...valid, tasks: [{ ...valid.tasks[0], id }] })[0]?.field).toBe("tasks[0].id");
    }
  });

  it("rejects a missing workspace_dir", () => {
    expect(problemsOf({ tasks: valid.tasks, environment: {} })[0]?.field).toBe("environment.workspace_dir");
  });
});

describe("JSON Schema", () => {
  it("is generated for every format and forbids unknown keys", () => {
    for (const name of ["report", "assignments", "config", "status"] as const) {
      const schema = jsonSchemaOf(name) as { type: string; additionalProperties?: boolean };
      expect(schema.type).toBe("object");
      expect(schema.additionalProperties).toBe(false);
    }
  });

  it("describes each of the ledger's events by its type", () => {
    const schema = jsonSchemaOf("ledger-event") as { oneOf?: { properties: { type: { const: string } } }[] };
    const types = (schema.oneOf ?? []).map((o) => o.properties.type.const);
    expect(types).toEqual(
      expect.arrayContaining(["run.accepted", "task.launched", "task.exited", "merge.success"]),
    );
    expect(types).toHaveLength(new Set(types).size);
  });
});
