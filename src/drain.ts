import type { Logger } from './logger.ts';
import type { HttpServer } from './http/server.ts';
import type { EnginePort } from './runs/engine-port.ts';

/**
 * The shutdown of an API process (SIGTERM/SIGINT, or App.close), in phases, one log line each
 * (docs/operations.md#start-and-stop). /readyz already answers 503 when this starts.
 *
 * 1. HTTP: no new connections; open SSE streams end with a `retry:` hint (their clients reconnect to
 *    another process with Last-Event-ID); requests in flight finish, for at most 40% of the grace.
 * 2. Engine and webhooks, side by side: the engine stops admitting and drains (the embedded engine lets
 *    its drivers reach a durable point and releases their leases; the Temporal worker finishes its
 *    tasks); webhook sends in flight finish. Whatever is cut here is taken over by another process:
 *    runs from their last committed step, deliveries after their claim lease.
 * Everything left when the grace has passed is abandoned (the caller exits).
 */

export interface DrainParts {
  log: Logger;
  graceMs: number;
  http: HttpServer;
  engine: EnginePort;
  webhooks: { stop(): Promise<void> };
  /** Background work that only needs to stop (sweeps, stream slots). */
  background: { stop?(): Promise<void>; close?(): Promise<void> }[];
}

/** Share of the grace the HTTP phase may take; the rest is the engine's. */
const HTTP_SHARE = 0.4;

/** Resolves when every phase ended or the grace passed; true when it all ended in time. */
export async function drain(p: DrainParts): Promise<boolean> {
  const started = Date.now();
  const ms = () => Date.now() - started;
  p.log.info({ graceMs: p.graceMs }, 'drain: /readyz answers 503; no new connections');
  const phases = (async () => {
    await p.http.close(Math.floor(p.graceMs * HTTP_SHARE));
    p.log.info({ ms: ms() }, 'drain: HTTP requests finished, streams ended with a retry hint');
    await Promise.all(p.background.map(async (b) => (b.stop ? b.stop() : b.close?.())));
    await Promise.all([
      p.engine.stop().then(() => p.log.info({ ms: ms() }, 'drain: engine stopped, in-flight work drained, leases released')),
      p.webhooks.stop().then(() => p.log.info({ ms: ms() }, 'drain: webhook sends finished')),
    ]);
    return true;
  })();
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => {
    timer = setTimeout(() => resolve(false), p.graceMs);
  });
  const inTime = await Promise.race([phases, late]).finally(() => clearTimeout(timer));
  if (inTime) p.log.info({ ms: ms() }, 'drain: done');
  else p.log.warn({ ms: ms(), graceMs: p.graceMs }, 'drain: the grace passed; what is left is taken over by other processes');
  return inTime;
}
