import { addUsage, type Usage } from "../contract/agent-result.js";
import { type OutputFormat, parseAgentOutput } from "./results.js";

/**
 * The CLIs whose headless output is a stream of events each carrying the usage of one model
 * call, so what an attempt has spent can be known while it runs: opencode's (and kilo's)
 * `step_finish`, pi's `message_end`. The others say it once, at the end: codex at its one turn's
 * end, claude, qwen, gemini and cn in their result, copilot in a side file written at exit
 * (docs/research/usage-streams.md); their sessions' files are read instead.
 */
const STREAMING: ReadonlySet<OutputFormat> = new Set(["opencode-jsonl", "pi-jsonl"]);

export function streamsUsage(format: OutputFormat): boolean {
  return STREAMING.has(format);
}

/**
 * A streaming CLI's usage so far, from its output fed in pieces as they are written: whole lines
 * are read once each (their steps' usages add up), a line not yet ended waits for its end. Pure:
 * the caller reads the file.
 */
export class UsageStream {
  private rest = "";
  private sum: Usage | null = null;

  constructor(private readonly format: OutputFormat) {}

  /** Adds what the CLI wrote next; returns whether the total changed. */
  push(text: string): boolean {
    const lines = this.rest + text;
    const cut = lines.lastIndexOf("\n");
    if (cut < 0) {
      this.rest = lines;
      return false;
    }
    this.rest = lines.slice(cut + 1);
    const usage = parseAgentOutput(this.format, lines.slice(0, cut + 1)).usage;
    if (usage === null) return false;
    this.sum = addUsage([this.sum, usage]);
    return true;
  }

  get total(): Usage | null {
    return this.sum;
  }
}
