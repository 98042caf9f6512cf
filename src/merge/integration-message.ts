import type { Redo } from "../contract/report.js";

/** A task as the integration merges it: the attempt whose result it is, and its redos. */
export interface MergedTask {
  id: string;
  attempt: number;
  commit: string;
  redone: readonly Redo[];
}

/** Tasks merged on top of a redone task's earlier result (replayed): that result stays in the history. */
export type Carriers = ReadonlyMap<string, readonly string[]>;

const short = (commit: string): string => commit.slice(0, 12);

/** The attempt whose result a task's first redo replaced. */
export function earlierAttempt(t: Pick<MergedTask, "redone">): number | null {
  const first = t.redone[0];
  return first ? first.attempt - 1 : null;
}

/**
 * The integration commit's message: each task with the attempt merged (and its commit: an
 * agent's own commits carry no termorch trailer), what each redo replaced, and which earlier
 * results stay reachable because a dependent was replayed onto them (`carriers`, by redone task).
 * Task commits say their attempt themselves (`Termorch-Attempt`); this says which one won.
 */
export function integrationMessage(runId: string, tasks: readonly MergedTask[], carriers: Carriers): string {
  const redone = tasks.filter((t) => t.redone.some((r) => r.outcome === "resolved"));
  const lines = [
    `termorch: integrate run ${runId}${redone.length ? ` (${redone.map((t) => t.id).join(", ")} redone)` : ""}`,
    "",
    "Tasks merged, in order:",
    ...tasks.map((t) => {
      const last = t.redone.findLast((r) => r.outcome === "resolved");
      const how = last
        ? `: redo ${last.redo} of its conflict with ${last.conflicted_with.join(", ") || "the tasks before it"}`
        : "";
      return `- ${t.id} (attempt ${t.attempt}${how}, ${short(t.commit)})`;
    }),
  ];
  for (const t of redone) {
    const first = t.redone[0]!;
    const before = `attempt ${earlierAttempt(t)} (${short(first.before_commit)})`;
    const failed = t.redone.filter((r) => r.outcome !== "resolved").map((r) => `attempt ${r.attempt}`);
    const by = carriers.get(t.id) ?? [];
    lines.push(
      "",
      `${t.id} was redone: its ${before} conflicted with ${first.conflicted_with.join(", ") || "the tasks merged before it"} in ${first.files.join(", ")}; ` +
        `${failed.length ? `${failed.join(", ")} did not resolve it; ` : ""}its attempt ${t.attempt} is merged. ` +
        (by.length
          ? `Its ${before} stays in this history as the start of ${by.join(", ")}, whose own changes alone were merged onto attempt ${t.attempt}.`
          : `Its ${before} is not part of this history.`),
    );
  }
  lines.push(
    "",
    `Termorch-Run: ${runId}`,
    ...(redone.length ? [`Termorch-Redone: ${redone.map((t) => t.id).join(", ")}`] : []),
    "",
  );
  return lines.join("\n");
}
