import type { MergeProgress, RunState } from "../contract/state.js";
import type { TaskRecorder } from "../task/recorder.js";
import type { RunPlan } from "../task/run-plan.js";

/** state.json of a running run: what a resume rebuilds it from. */
export function runStateOf(
  run: RunPlan,
  recorder: Pick<TaskRecorder, "all" | "socketPath">,
  socket: string,
  taskJournal: string,
  notices: readonly string[],
  merge: MergeProgress | null,
): RunState {
  return {
    schema_version: 1,
    run_id: run.runId,
    phase: "running",
    pid: process.pid,
    assignments_file: run.input.file,
    base_dir: run.baseDir,
    run_dir: run.runDir,
    workspace: run.input.workspace,
    socket,
    socket_path: recorder.socketPath,
    assignments_sha256: run.input.sha256,
    config_file: run.input.configFile,
    cwd: run.cwd,
    options: run.settings,
    git: run.git
      ? {
          root: run.git.root,
          base_commit: run.git.baseCommit,
          target_ref: run.git.targetRef,
          prefix: run.git.prefix,
        }
      : null,
    started_at: run.startedAt,
    updated_at: Date.now(),
    waves: run.waves.waves,
    tasks: [...recorder.all()],
    task_journal: taskJournal,
    notices: [...notices],
    merge,
    report: null,
    stopped: null,
    exit_code: null,
  };
}
