import { closeSync, fstatSync, openSync, readFileSync, readSync, type Stats, statSync } from "node:fs";
import { dirname, join } from "node:path";
import { RunState, TaskRun } from "../contract/state.js";
import { AppendFile } from "./append-file.js";

/**
 * The task journal of a live run: one line per task transition, the whole TaskRun, appended
 * to one file. A later line supersedes earlier ones of the same task. Appending costs a single
 * write() of microseconds; rewriting a file instead (state.json, or a file per task) costs a
 * full copy or, on ext4, a flush of the file it replaces (~0.1 ms), at every transition.
 */
export class TaskJournal {
  private readonly file: AppendFile;
  private checked = false;

  constructor(readonly path: string) {
    this.file = new AppendFile(path);
  }

  /** Synchronous: its callers write the task's status file right after, which must never be ahead of it. */
  write(task: TaskRun): void {
    if (!this.checked) {
      // A crash mid-append left a torn line: end it, so the next line stands on its own.
      if (!this.file.endsWithNewline()) this.file.append("\n");
      this.checked = true;
    }
    this.file.append(`${JSON.stringify(task)}\n`);
  }

  close(): void {
    this.file.close();
    this.checked = false;
  }
}

export type RunStateRead = { ok: true; state: RunState } | { ok: false; path: string; problem: string };

/**
 * Reads `<runDir>/state.json` with a live run's task journal merged in. `problem` says what is
 * wrong with a missing, damaged or unreadable file; the caller words it for its user.
 */
export function readRunStateFile(runDir: string, journals?: JournalReaders): RunStateRead {
  const path = join(runDir, "state.json");
  // A live view reads a run's state at each of its tasks' moves, and state.json changes only at
  // the run's start and end (the moves are in the journal): the parsed file is kept until then.
  const file = journals ? statSync(path, { throwIfNoEntry: false }) : undefined;
  const kept = file ? journals?.keptState(path, file) : undefined;
  if (kept) return { ok: true, state: withJournal(kept, journals) };
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return { ok: false, path, problem: "missing" };
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    return {
      ok: false,
      path,
      problem: `not JSON: ${error instanceof Error ? error.message : String(error)}`,
    };
  }
  const parsed = RunState.safeParse(data);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    return { ok: false, path, problem: `unreadable: ${issue?.path.join(".")}: ${issue?.message}` };
  }
  if (file) journals?.keepState(path, file, parsed.data);
  return { ok: true, state: withJournal(parsed.data, journals) };
}

function withJournal(state: RunState, journals: JournalReaders | undefined): RunState {
  if (state.task_journal === null) return state;
  const newest = (journals?.of(state.task_journal) ?? new JournalReader(state.task_journal)).read();
  if (newest.size === 0) return state; // no task has moved yet
  return { ...state, tasks: state.tasks.map((t) => newest.get(t.id) ?? t) };
}

/**
 * A task journal read as it grows: each read parses only the lines appended since the last one
 * (a live view reads a chatty run's journal several times a second). A journal that shrank was
 * replaced: it is read again from its start.
 */
export class JournalReader {
  private offset = 0;
  private readonly newest = new Map<string, TaskRun>();

  constructor(readonly path: string) {}

  /** Each task's newest record; empty while no task has moved (or the journal is gone). */
  read(): ReadonlyMap<string, TaskRun> {
    let fd: number;
    try {
      fd = openSync(this.path, "r");
    } catch {
      this.offset = 0;
      this.newest.clear();
      return this.newest;
    }
    try {
      const size = fstatSync(fd).size;
      if (size < this.offset) {
        this.offset = 0;
        this.newest.clear();
      }
      if (size === this.offset) return this.newest;
      const chunk = Buffer.alloc(size - this.offset);
      const got = readSync(fd, chunk, 0, chunk.length, this.offset);
      // Whole lines only: a line still being written is read with the next append.
      const end = chunk.subarray(0, got).lastIndexOf(0x0a) + 1;
      this.offset += end;
      for (const line of chunk.subarray(0, end).toString("utf8").split("\n")) this.take(line);
      return this.newest;
    } finally {
      closeSync(fd);
    }
  }

  private take(line: string): void {
    if (line === "") return;
    let raw: unknown;
    try {
      raw = JSON.parse(line);
    } catch {
      return; // a torn line: the transition it was writing never happened
    }
    const task = TaskRun.safeParse(raw);
    if (task.success) this.newest.set(task.data.id, task.data);
  }
}

/** A file as far as telling it changed goes: an atomic write replaces it (a new inode). */
type FileStamp = Pick<Stats, "ino" | "size" | "mtimeMs">;

function sameFile(a: FileStamp, b: FileStamp): boolean {
  return a.ino === b.ino && a.size === b.size && a.mtimeMs === b.mtimeMs;
}

/**
 * What a live view keeps of the runs it follows from view to view: a reader per task journal,
 * and each state.json as last parsed.
 */
export class JournalReaders {
  private readonly readers = new Map<string, JournalReader>();
  private readonly states = new Map<string, { file: FileStamp; state: RunState }>();

  /** The state parsed from `path` when it was this same file. */
  keptState(path: string, file: FileStamp): RunState | undefined {
    const kept = this.states.get(path);
    return kept && sameFile(kept.file, file) ? kept.state : undefined;
  }

  keepState(path: string, file: FileStamp, state: RunState): void {
    this.states.set(path, { file: { ino: file.ino, size: file.size, mtimeMs: file.mtimeMs }, state });
  }

  of(path: string): JournalReader {
    let reader = this.readers.get(path);
    if (!reader) {
      reader = new JournalReader(path);
      this.readers.set(path, reader);
    }
    return reader;
  }

  /** Forgets the journals not in `journals` (runs no longer in view, or reported) and the states of runs not in `runDirs`. */
  keepOnly(journals: ReadonlySet<string>, runDirs: ReadonlySet<string>): void {
    for (const path of this.readers.keys()) if (!journals.has(path)) this.readers.delete(path);
    for (const path of this.states.keys()) if (!runDirs.has(dirname(path))) this.states.delete(path);
  }
}
