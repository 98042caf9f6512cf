import PQueue from "p-queue";
import type { Config } from "../contract/config.js";

/**
 * The bounds a task's start waits for besides the run's max_parallel: its agent entry's
 * `max_parallel`, and its provider group's (`providers`, named by the entry's `provider`). A
 * task holds its agent's slot, then its provider's, then the run's, in that order, each a queue
 * in the run's priority order: a task waiting for its agent holds no slot another agent could use.
 */
export class AgentSlots {
  private readonly queues = new Map<string, PQueue>();

  constructor(private readonly config: Pick<Config, "agents" | "providers">) {}

  /** Runs `work` (which takes the run's slot) once the task's agent and provider have one free. */
  run<T>(agent: string, priority: number, work: () => Promise<T>): Promise<T> {
    const entry = Object.hasOwn(this.config.agents, agent) ? this.config.agents[agent] : undefined;
    const group =
      entry?.provider && Object.hasOwn(this.config.providers, entry.provider)
        ? this.config.providers[entry.provider]
        : undefined;
    const bounds: [string, number][] = [
      ...(entry?.max_parallel ? [[`agent ${agent}`, entry.max_parallel] as [string, number]] : []),
      ...(group ? [[`provider ${entry!.provider}`, group.max_parallel] as [string, number]] : []),
    ];
    // The narrowest first: it is taken first and given back last.
    return bounds.reduceRight<() => Promise<T>>(
      (inner, [key, n]) =>
        () =>
          this.queueOf(key, n).add(inner, { priority, throwOnTimeout: true }),
      work,
    )();
  }

  private queueOf(key: string, concurrency: number): PQueue {
    let q = this.queues.get(key);
    if (!q) {
      q = new PQueue({ concurrency });
      this.queues.set(key, q);
    }
    return q;
  }
}
