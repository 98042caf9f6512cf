/**
 * Checks `check` every `intervalMs` until it holds (true) or `ms` have passed (false). For
 * conditions nothing signals, such as a process or process group that ends.
 */
export async function pollUntil(check: () => boolean, ms: number, intervalMs = 20): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    if (check()) return true;
    if (Date.now() >= end) return false;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
