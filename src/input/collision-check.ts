import type { PredictedCollision } from "../contract/collision.js";
import { InputError } from "../errors.js";
import { collisionText, predictCollisions } from "../plan/collisions.js";
import { buildGraph } from "../plan/graph.js";
import type { RunInput } from "./assignments-file.js";

/** The run's predicted collisions (plan/collisions.ts), in the file's task order. */
export function collisionsOf(input: Pick<RunInput, "assignments">): PredictedCollision[] {
  const { tasks } = input.assignments;
  return predictCollisions(tasks, buildGraph(tasks).order);
}

/**
 * The run's predicted collisions; refused (exit 2, every pair named) when the file or the config
 * says they are errors (`mode.collisions` / `defaults.collisions` "error").
 */
export function checkCollisions(
  input: Pick<RunInput, "assignments" | "config" | "file">,
): PredictedCollision[] {
  const found = collisionsOf(input);
  const on = input.assignments.mode.collisions ?? input.config.defaults.collisions ?? "warn";
  if (on === "error" && found.length > 0)
    throw new InputError(
      found.map((c) => ({ file: input.file, field: "mode.collisions", message: collisionText(c) })),
      'Make the plan file-disjoint (a dependency between each pair, or paths that do not overlap), or set "collisions": "warn"; nothing was started.',
    );
  return found;
}
