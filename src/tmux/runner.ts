import { existsSync } from "node:fs";
import { join } from "node:path";
import type {
  AdoptedAttempt,
  AttemptRef,
  AttemptSpec,
  RunningAttempt,
  TaskRunner,
} from "../runner/task-runner.js";
import type { TmuxServer } from "./server.js";
import { type AdoptSpec, adopt, launch, Reconciler } from "./session.js";

/**
 * The local runner: every attempt in a detached session of termorch's private tmux server,
 * under the in-pane supervisor. It owns the reconcile pass of the attempts it watches.
 */
export class TmuxRunner implements TaskRunner {
  private readonly reconciler: Reconciler;

  /** `owner`: given to every attempt it launches (see AttemptSpec.owner). */
  constructor(
    readonly server: TmuxServer,
    private readonly owner?: AttemptSpec["owner"],
  ) {
    this.reconciler = new Reconciler(server);
  }

  get socket(): string {
    return this.server.socket;
  }

  socketPath(): Promise<string> {
    return this.server.socketPath();
  }

  launch(spec: AttemptSpec): Promise<RunningAttempt> {
    return launch(this.server, this.reconciler, this.owner ? { owner: this.owner, ...spec } : spec);
  }

  async adopt(ref: AttemptRef): Promise<AdoptedAttempt | null> {
    const { running, ...spec } = ref;
    // An exit record or a live session: the attempt started. A session that vanished is watched
    // too when the attempt was known to run: the watch then ends it as lost.
    const finished = existsSync(join(ref.attemptDir, "exit.json"));
    const live = !finished && (await this.server.hasSession(ref.session));
    if (!finished && !live && (!running || neverStarted(ref.attemptDir))) return null;
    return { attempt: await this.watch(spec), finished, live };
  }

  /** Watches an attempt an earlier process launched, whatever is left of it (a vanished one ends as lost). */
  watch(spec: AdoptSpec): Promise<RunningAttempt> {
    return adopt(this.server, this.reconciler, spec);
  }

  async close(sessions: readonly string[]): Promise<void> {
    if (sessions.length === 1) await this.server.killSession(sessions[0]!);
    else await this.server.killSessions(sessions);
  }

  async openSessions(): Promise<Set<string>> {
    return new Set((await this.server.listPanes()).map((p) => p.session));
  }

  async runsWithSessions(): Promise<Set<string>> {
    return new Set((await this.server.listPanes()).flatMap((p) => (p.run === null ? [] : [p.run])));
  }

  paste(session: string, file: string): Promise<void> {
    return this.server.pasteFile(session, file);
  }

  submit(session: string): Promise<void> {
    return this.server.sendKeys(session, ["Enter"]);
  }

  capture(sessions: readonly string[]): Promise<Map<string, string | null>> {
    return this.server.captureScreens(sessions);
  }

  async closeIfIdle(): Promise<void> {
    await this.server.closeIfIdle();
  }
}

/**
 * The attempt's supervisor never started: its folder was not made yet (the launch makes it
 * first), or still holds the launch file the supervisor deletes once it has read it. A retry is
 * recorded while the task is still recorded as running (its earlier attempt), so a driver killed
 * before the retry's session existed leaves exactly this; the retry is launched, not lost.
 */
function neverStarted(attemptDir: string): boolean {
  return !existsSync(attemptDir) || existsSync(join(attemptDir, "launch"));
}
