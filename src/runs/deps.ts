import type { Config } from '../config/config.ts';
import type { Em, Orm } from '../db/orm.ts';
import type { Logger } from '../logger.ts';
import type { Sealer } from '../security/crypto.ts';
import type { RunEventBus } from './run-event-bus.ts';

/**
 * What the runs module's operations touch: the database, the bus that tells live readers about new
 * events, the sealer for run secrets. No engine: the engines and the services both call the runs
 * module, never each other (the engine port is handed to the services in src/app.ts).
 */
export interface RunsDeps {
  config: Config;
  orm: Orm;
  log: Logger;
  sealer: Sealer;
  bus: RunEventBus;
  /** Absolute prefix of URLs in responses: PUBLIC_BASE_URL or http://localhost:PORT/v1. */
  baseUrl: () => string;
  /** Wakes the webhook dispatcher after a terminal transition commits (it also polls on its own). */
  webhooks?: { notify(): void };
}

export function fork(deps: Pick<RunsDeps, 'orm'>): Em {
  return deps.orm.em.fork() as unknown as Em;
}
