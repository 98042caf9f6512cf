import { isLive, type RunView, type StatusView, type TaskView } from "../contract/status-view.js";
import { shownState } from "./model.js";

/** The live view `watch` follows (RunFeed, or anything that gives views the same way). */
export interface ViewSource {
  current(): StatusView;
  subscribe(listener: (view: StatusView) => void): () => void;
  /** Computes a new view now. */
  refresh(): void;
}

/** When what a line reports happened, as far as the view knows. */
function taskTime(t: TaskView, fallback: string): string {
  if (shownState(t) === "waiting") return t.waiting_since ?? fallback;
  if (t.state === "redo") return t.redo?.started_at ?? fallback;
  if (isLive(t.state)) return t.started_at ?? fallback;
  if (["success", "failed", "skipped"].includes(t.state)) return t.finished_at ?? fallback;
  return fallback;
}

/** `<time> <run> <task> <state> wave <n> attempt <k>[ reason <r>][ exit <code>]` */
export function taskLine(run: RunView, t: TaskView, generatedAt: string): string {
  const parts = [
    taskTime(t, generatedAt),
    run.run_id,
    t.id,
    shownState(t),
    "wave",
    t.wave === null ? "-" : String(t.wave),
    "attempt",
    String(t.attempts),
  ];
  if (t.redo)
    parts.push(
      ...(t.redo.cause === "gate"
        ? ["fix", `${t.redo.n}/${t.redo.of}`]
        : ["redo", `${t.redo.n}/${t.redo.of}`, "with", t.redo.with.join(",") || "-"]),
    );
  if (t.reason) parts.push("reason", t.reason);
  if (t.exit_code !== null && !isLive(t.state)) parts.push("exit", String(t.exit_code));
  if (t.needs_human) parts.push("needs_human");
  return parts.join(" ");
}

/** `<time> <run> - reported exit <code>` or `<time> <run> - interrupted` (task ids never are `-`). */
export function runLine(run: RunView): string {
  return run.phase === "reported"
    ? `${run.updated_at} ${run.run_id} - reported exit ${run.exit_code ?? "unknown"}`
    : `${run.updated_at} ${run.run_id} - interrupted (resume it with: termorch resume ${run.run_dir})`;
}

/**
 * watch when stdout is not a terminal: one line per change of a task's state (its state, attempt,
 * or waiting for input), one per step of a run's merge it shows (`<time> <run> - merge <what>`: a
 * bisect's probe, the culprit it found), one per run once nobody drives it any more, until every run of the
 * scope is settled ("done") or `signal` aborts ("aborted").
 */
export function plainWatch(
  feed: ViewSource,
  write: (line: string) => void,
  signal: AbortSignal,
): Promise<"done" | "aborted"> {
  const seen = new Map<string, string>();
  const mergeSeen = new Map<string, string>();
  const settledRuns = new Set<string>();
  const problems = new Set<string>();
  const queued = new Set<string>();
  return new Promise((resolve) => {
    let stop: (() => void) | null = null;
    let finished = false;
    const finish = (how: "done" | "aborted"): void => {
      if (finished) return;
      finished = true;
      stop?.();
      signal.removeEventListener("abort", onAbort);
      resolve(how);
    };
    const onAbort = (): void => finish("aborted");
    const show = (view: StatusView): void => {
      if (finished) return;
      for (const run of view.runs) {
        for (const t of run.tasks) {
          // A task's status file says it finished a moment before state.json has its time and
          // exit code: its line waits for them (the ledger write brings the next view).
          const final = ["success", "failed", "skipped"].includes(t.state);
          if (final && t.finished_at === null && run.phase === "running") continue;
          const key = `${run.run_id}\0${t.id}`;
          const now = `${shownState(t)}\0${t.attempts}`;
          if (seen.get(key) === now) continue;
          seen.set(key, now);
          write(taskLine(run, t, view.generated_at));
        }
        // Its merge's steps: each probe of a bisect, and the culprit it found.
        const merge = run.merge?.line ?? null;
        if (merge !== null && mergeSeen.get(run.run_id) !== merge) {
          mergeSeen.set(run.run_id, merge);
          write(`${view.generated_at} ${run.run_id} - merge ${merge}`);
        }
        // The view reads a run's state again before it calls it interrupted (ops/status.ts).
        if (run.phase !== "running" && !settledRuns.has(run.run_id)) {
          settledRuns.add(run.run_id);
          write(runLine(run));
        }
      }
      for (const p of view.problems) {
        const key = `${p.run_id ?? ""}\0${p.run_dir ?? ""}`;
        if (problems.has(key)) continue;
        problems.add(key);
        write(`${view.generated_at} ${p.run_id ?? p.run_dir ?? "?"} - unreadable: ${p.message}`);
      }
      for (const q of view.queued) {
        if (queued.has(q.run_dir)) continue;
        queued.add(q.run_dir);
        write(`${q.claimed_at ?? view.generated_at} ${q.run_id} - queued`);
      }
      // Runs that cannot be read never settle: they do not hold the watch open. Queued runs do:
      // the daemon starts them.
      if (view.queued.length === 0 && view.runs.every((r) => r.phase !== "running")) finish("done");
    };
    if (signal.aborted) return finish("aborted");
    signal.addEventListener("abort", onAbort, { once: true });
    stop = feed.subscribe(show);
    show(feed.current());
  });
}
