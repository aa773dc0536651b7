/** Exponential backoff with jitter: base × 2^(attempt-1), capped at 8 s, between half and all of it. */
export function backoffMs(attempt: number, baseMs: number): number {
  const full = Math.min(8000, baseMs * 2 ** (attempt - 1));
  return Math.round(full / 2 + (Math.random() * full) / 2);
}

/** Resolves after `ms`, or rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
