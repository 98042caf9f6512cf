import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { execa } from "execa";

const ROOT = resolve(import.meta.dirname, "..", "..");

export interface CampaignResult {
  campaign: string;
  mode: string;
  seed: number;
  trials: number;
  figures: Record<string, unknown>;
  must_be_zero: string[];
  failed: string[];
  failures: unknown[];
}

/**
 * Runs one campaign's smoke version (`node test/reliability/<name>.mjs --smoke`) as CI does and
 * returns its result. The script's own output is attached to a failure so that its seed and
 * replay line reach the CI log.
 */
export async function runSmoke(
  name: string,
  timeoutMs = 400_000,
): Promise<CampaignResult & { output: string }> {
  const dir = mkdtempSync(join(tmpdir(), "termorch-rel-smoke-"));
  try {
    const file = join(dir, "result.json");
    const r = await execa(
      process.execPath,
      [join(ROOT, "test", "reliability", `${name}.mjs`), "--smoke", "--json", file],
      {
        reject: false,
        cwd: ROOT,
        all: true,
        timeout: timeoutMs,
      },
    );
    let result: CampaignResult;
    try {
      result = JSON.parse(readFileSync(file, "utf8")) as CampaignResult;
    } catch {
      throw new Error(`${name} campaign wrote no result (exit ${r.exitCode}):\n${r.all}`);
    }
    return { ...result, output: String(r.all) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
