/**
 * Polls `probe` every `everyMs` until it returns a truthy value, which is returned; throws
 * "timed out … waiting for <what>" after `timeoutMs`. The one polling helper of the test suites.
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  timeoutMs = 10_000,
  everyMs = 25,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
