/**
 * Waits for `work` at most `ms`: its value, or undefined once the time is up. Its timer is
 * cleared as soon as `work` settles: a process's last steps bounded with a bare timer race (a
 * worker's stop, a queue's close) kept the process alive for the whole bound after the work was
 * done, since nothing else was left to end it.
 */
export async function boundedWait<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}
