import { join } from "node:path";
import { BisectJournal, type BisectRound, type GateRun } from "../contract/merge-journal.js";
import type { Gate } from "../contract/report.js";
import type { MergeProgress } from "../contract/state.js";
import { writeJsonAtomic } from "../fs/atomic.js";
import { readJsonRecord } from "../fs/json-record.js";
import type { FoldItem } from "../git/fold.js";
import { partialIntegration } from "../git/merge.js";
import { treeOf } from "../git/repo.js";
import { probePoint } from "../task/faults.js";
import { testsTail } from "../task/feedback-facts.js";
import type { Ports } from "../task/ports.js";
import type { RunPlan } from "../task/run-plan.js";
import type { RunStop } from "../task/stop.js";
import type { TestsRan } from "../task/tests-gate.js";
import { expectedGateRuns, nextBisectStep } from "./bisect-search.js";
import { runLevelTests } from "./run-level-gates.js";

const FILE = "bisect.json";
/** The log name (and gate record) of every probe's run: `logs/probe-<ts>.out`. */
const PROBE_LOG = "probe";

/** Where the merge stage is, for the views (state.json's `merge`). */
export type MergeProgressSink = (p: MergeProgress | null) => void;

/** A red integration, as the merge built it. */
export interface RedIntegration {
  commit: string;
  /** Its failed run.tests_cmd, and how it ran. */
  gate: Gate;
  ran: TestsRan | null;
  /** The tasks' results as merged, in merge order, and after each a commit whose tree is the merge so far. */
  items: readonly FoldItem[];
  steps: readonly string[];
}

/** What the bisect needs of the run. */
export interface BisectSide {
  run: RunPlan;
  ports: Ports;
  stop: RunStop;
  progress: MergeProgressSink;
}

/** The run's bisects so far (none when the file is missing or damaged: its probes run again). */
export async function readBisects(run: Pick<RunPlan, "privateDir">): Promise<BisectJournal> {
  return (await readJsonRecord(BisectJournal, join(run.privateDir, FILE))) ?? { rounds: [] };
}

async function writeBisects(run: Pick<RunPlan, "privateDir">, journal: BisectJournal): Promise<void> {
  await writeJsonAtomic(join(run.privateDir, FILE), BisectJournal.parse(journal), 0o600, false);
}

/**
 * merge.on_gate_failure "bisect": the run-level tests_cmd is red on the integration. It runs on
 * the base first (red there: no task is to blame, and nothing more runs), then on probes, each
 * the merge of the first k tasks in merge order (an unreferenced commit of the integration's
 * first k results, checked out detached in the scratch worktree, never a branch), halving
 * until the first task whose merge turns it red is found (bisect-search.ts). Each gate run is
 * written to bisect.json before the next, and to the ledger (`merge.probe`); a resume of the
 * same integration goes on from what was judged, and one that ended is answered at once.
 * Answers the ended round: its bisect, the culprit and where its fix starts; "stopped" when the
 * run was cancelled meanwhile.
 */
export async function bisectGate(
  side: BisectSide,
  red: RedIntegration,
): Promise<BisectRound | "detached" | "stopped"> {
  const { run, ports, stop } = side;
  const { root, baseCommit } = run.git!;
  const journal = await readBisects(run);
  const tree = await treeOf(root, red.commit);
  const ended = journal.rounds.findLast((r) => r.integration_tree === tree && r.bisect !== null);
  if (ended) return ended;
  const n = red.items.length;
  let round = journal.rounds.at(-1);
  if (!round || round.bisect !== null || round.integration_tree !== tree) {
    round = {
      integration_tree: tree,
      base: null,
      probes: [],
      runs: red.ran ? { [n]: gateRunOf(red.ran) } : {},
      time_ms: 0,
      bisect: null,
      culprit: null,
      start: null,
    };
    journal.rounds.push(round);
  }
  const verdicts = new Map<number, boolean>(round.probes.map((p) => [p.k, p.passed]));
  if (round.base) verdicts.set(0, round.base.passed);
  await ports.ledger.append("merge.bisect_started", {
    gate: red.gate.name,
    integration: red.commit,
    tasks: n,
    judged: verdicts.size,
  });
  for (;;) {
    // Cancelled (or --fail-fast): no further probe, and none cut short counts as red.
    if (stop.ending) return "stopped";
    const step = n === 0 ? { kind: "red_on_base" as const } : nextBisectStep(n, verdicts);
    if (step.kind !== "probe") return finish(side, journal, round, red, step);
    const { k } = step;
    const task = k === 0 ? null : red.items[k - 1]!.task;
    const commit = k === 0 ? baseCommit : await probeCommit(run, red, k);
    side.progress({
      step: "bisecting",
      probe: { n: verdicts.size + 1, of: expectedGateRuns(n), k, task },
      culprit: null,
      red_on_base: false,
    });
    probePoint(run.fault, k, join(run.privateDir, "gates", `${PROBE_LOG}.json`));
    const started = ports.now();
    let ran: TestsRan | null = null;
    const gate = await runLevelTests(run, ports, stop, commit, PROBE_LOG, (r) => {
      ran = r;
    });
    if (gate === "detached") return gate;
    if (stop.ending) return "stopped";
    const duration_ms = Math.max(0, ports.now() - started);
    const passed = gate.passed === true;
    round.time_ms += duration_ms;
    if (ran) round.runs[String(k)] = gateRunOf(ran);
    if (k === 0) round.base = { commit, passed, duration_ms, detail: gate.detail };
    else round.probes.push({ k, task: task!, commit, passed, duration_ms, detail: gate.detail });
    verdicts.set(k, passed);
    await writeBisects(run, journal);
    await ports.ledger.append("merge.probe", {
      k,
      of: n,
      task,
      commit,
      passed,
      duration_ms,
      detail: gate.detail,
    });
  }
}

/** The bisect ended: its record, the culprit (with the gate's output there) and where a fix starts. */
async function finish(
  side: BisectSide,
  journal: BisectJournal,
  round: BisectRound,
  red: RedIntegration,
  step: { kind: "red_on_base" } | { kind: "culprit"; k: number },
): Promise<BisectRound> {
  const { run, ports } = side;
  const base = round.base ?? {
    // No task merged at all: the integration is the base.
    commit: red.commit,
    passed: false,
    duration_ms: 0,
    detail: red.gate.detail,
  };
  const gateRuns = 1 + (round.base ? 1 : 0) + round.probes.length;
  const common = {
    gate: red.gate.name,
    integration: red.commit,
    base,
    probes: round.probes,
    gate_runs: gateRuns,
    time_ms: round.time_ms,
  };
  if (step.kind === "red_on_base") {
    round.bisect = { ...common, outcome: "red_on_base", culprit: null };
  } else {
    const { k } = step;
    const n = red.items.length;
    const item = red.items[k - 1]!;
    const probe = round.probes.find((p) => p.k === k);
    const ran = round.runs[String(k)];
    const tail = ran ? testsTail(run.runDir, testsRanOf(ran)).tail : "";
    round.culprit = {
      task: item.task,
      commit: item.commit,
      probe_commit: k === n ? red.commit : probe!.commit,
      gate: red.gate.name,
      detail: k === n ? red.gate.detail : probe!.detail,
      output_tail: ports.redactor.redact(tail),
      probes: round.probes.length,
      gate_runs: gateRuns,
      time_ms: round.time_ms,
      fixed: null,
    };
    // The search ends next to a green k - 1 it judged: the base, or a probe.
    round.start = k === 1 ? run.git!.baseCommit : round.probes.find((p) => p.k === k - 1)!.commit;
    round.bisect = { ...common, outcome: "culprit", culprit: item.task };
  }
  await writeBisects(run, journal);
  const b = round.bisect;
  await ports.ledger.append("merge.bisect_finished", {
    outcome: b.outcome,
    culprit: b.culprit,
    probes: b.probes.length,
    gate_runs: b.gate_runs,
    time_ms: b.time_ms,
  });
  side.progress({
    step: "bisecting",
    probe: null,
    culprit: b.culprit,
    red_on_base: b.outcome === "red_on_base",
  });
  return round;
}

/** The merge of the first k tasks as a commit of the integration's first k results (unreferenced). */
async function probeCommit(run: RunPlan, red: RedIntegration, k: number): Promise<string> {
  const { root, baseCommit } = run.git!;
  const merged = red.items.slice(0, k);
  return partialIntegration(root, {
    base: baseCommit,
    commits: merged.map((m) => m.commit),
    tree: await treeOf(root, red.steps[k - 1]!),
    message: `termorch: probe of ${merged.map((m) => m.task).join(", ")} for a bisect of the run-level tests_cmd\n\nTermorch-Run: ${run.runId}\n`,
    identity: run.identity,
  });
}

export function gateRunOf(r: TestsRan): GateRun {
  return { command: r.command, exit_code: r.exitCode, how: r.how, logs: r.logs };
}

export function testsRanOf(r: GateRun): TestsRan {
  return { command: r.command, exitCode: r.exit_code, how: r.how, logs: r.logs };
}
